"""thunder's TE executor (EXECUTOR: legacy or functional) runs its linears in FP8 where the caller turned FP8 off: a
training loop's te.autocast(enabled=False) around the compiled program (a warm-up step, an evaluation forward) changes
nothing, where eager te.Linear runs in high precision, as torch does. An fp32 MLP of 2 linears (no bias), one forward
and backward under te.autocast(enabled=False): eager te.Linear, plain torch, and thunder.jit with the executor first.
Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
import importlib
import importlib.metadata
import sys

import torch

#: The executor under test: "legacy" or "functional".
EXECUTOR = "legacy"
#: Where the executor lives (module, attribute, what its module defines), newest thunder first.
CANDIDATES = {
    "legacy": [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
               ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear")],
    "functional": [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
                   ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")],
}
SIZES, TOKENS = (32, 64, 16), 16
#: TE symbols of thunder's forward trace that hold a linear, by executor.
TE_LINEAR = {"legacy": "te_linear_", "functional": "te_functional_linear_fwd"}


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def find_executor() -> tuple:
    """(the executor, its module's marker class), or (None, why there is none)."""
    for module_name, attribute, marker in CANDIDATES[EXECUTOR]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, marker):
            if (executor := getattr(module, attribute)) is None:
                return None, f"{module_name}.{attribute} is None: this thunder could not import TransformerEngine"
            return executor, getattr(module, marker)
    return None, f"this thunder has no {EXECUTOR} TE executor"


def mlp(linear) -> torch.nn.Sequential:
    generator, layers = torch.Generator().manual_seed(0), [linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / layer.weight.shape[1] ** 0.5)
    return torch.nn.Sequential(*layers).cuda()


def step(net, off) -> list:
    """One forward and backward under `off` (FP8 turned off): the output and the input's gradient."""
    x = torch.randn(TOKENS, SIZES[0], generator=torch.Generator().manual_seed(1)).cuda().requires_grad_()
    with off():
        y = net(x)
    y.backward(torch.ones_like(y))
    return [y.detach().clone(), x.grad.clone()]


def main() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        cannot("no FP8 GPU (compute capability 8.9 or newer)")
    try:
        import thunder
        import transformer_engine
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    executor, marker = find_executor()
    if executor is None:
        cannot(marker)
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    recipe = DelayedScaling()
    off = lambda: te.autocast(enabled=False, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=False, fp8_recipe=recipe)  # noqa: E731
    torch_run = step(mlp(lambda a, b: torch.nn.Linear(a, b, bias=False)), off)
    eager = step(mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32)), off)
    options = {"executors": [executor, *thunder.get_default_executors()]}
    if EXECUTOR == "functional":
        options["transforms"] = [marker()]
    else:  # the legacy executor takes the recipe here and wraps its forward in its own fp8_autocast
        options["te_fp8_recipe"] = recipe
    jitted = thunder.jit(mlp(lambda a, b: torch.nn.Linear(a, b, bias=False)), **options)
    try:
        jitted_run = step(jitted, off)
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: thunder raised (another defect): {error!r:.300}")
        sys.exit(1)
    held = sum(b.sym.name.startswith(TE_LINEAR[EXECUTOR]) for b in thunder.last_traces(jitted)[-1].bound_symbols)
    apart = lambda a, b: max((p - q).abs().max().item() for p, q in zip(a, b))  # noqa: E731
    print(f"under te.autocast(enabled=False): max |eager TE - torch| {apart(eager, torch_run):.3g}, max |thunder "
          f"({EXECUTOR}) - torch| {apart(jitted_run, torch_run):.3g}; TE linears in thunder's forward trace: {held}")
    if held == 0:
        print("NOT REPRODUCED: TE holds no linear in thunder's forward trace: thunder ran them in torch (another defect)")
        sys.exit(1)
    if apart(jitted_run, torch_run) > 0.05 and apart(jitted_run, torch_run) > 10 * apart(eager, torch_run):
        print(f"REPRODUCED: with FP8 turned off, thunder's {EXECUTOR} TE executor still quantizes (it parts from torch by "
              f"{apart(jitted_run, torch_run):.3g}) where eager TE runs in high precision")
        sys.exit(0)
    print("NOT REPRODUCED: thunder runs the linears in high precision under the disabled autocast, as eager TE")
    sys.exit(1)


if __name__ == "__main__":
    main()
