"""From TransformerEngine 2.10 thunder's TE executor (EXECUTOR: legacy, or the functional one of thunder 0.2.3 ..
0.2.5.dev20250824) claims no linear: under thunder.jit with it first, thunder runs every linear in torch, silently,
with no FP8. A bf16 MLP of 3 linears, one training step (the legacy executor wraps its forward in fp8_autocast itself,
with the recipe given to thunder.jit; the functional one runs under TE's FP8 autocast, with its transform); the
forward trace's symbols say who ran each linear. Needs an FP8 GPU (compute capability 8.9 or newer) and TE."""
import contextlib
import importlib.metadata
import re
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
#: The forward trace's symbol of a linear the executor holds.
HELD = {"legacy": r"\bte_linear_\d+\(", "functional": r"\bte_functional_linear_fwd\("}
SIZES = (48, 64, 32, 16)


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def executor_options(thunder, recipe) -> dict:
    """thunder.jit's keyword arguments that put the executor first."""
    for module_name, attribute, marker in CANDIDATES[EXECUTOR]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, marker):
            executor = getattr(module, attribute)
            if executor is None:
                cannot(f"{module_name}.{attribute} is None: this thunder could not import TransformerEngine")
            options = {"executors": [executor, *thunder.get_default_executors()]}
            if EXECUTOR == "functional":
                options["transforms"] = [getattr(module, marker)()]
            else:
                options["te_fp8_recipe"] = recipe
            return options
    cannot(f"this thunder has no {EXECUTOR} TE executor")


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
    recipe = DelayedScaling()
    options = executor_options(thunder, recipe)
    torch.manual_seed(0)
    net = torch.nn.Sequential(*(torch.nn.Linear(a, b, bias=False) for a, b in zip(SIZES, SIZES[1:])))
    jitted = thunder.jit(net.to("cuda", torch.bfloat16), **options)
    x = torch.randn(2, 8, SIZES[0], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    if EXECUTOR == "functional":
        fp8 = te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)
    else:
        fp8 = contextlib.nullcontext()  # the legacy executor wraps its forward in fp8_autocast itself
    try:
        with fp8:
            jitted(x).float().sum().backward()
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: thunder raised before the linears' owner could be read (another defect): {error!r:.300}")
        sys.exit(1)
    forward = str(thunder.last_traces(jitted)[-1])
    held = len(re.findall(HELD[EXECUTOR], forward))
    linears = len(SIZES) - 1
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    if held == 0:
        print(f"REPRODUCED: the {EXECUTOR} TE executor held 0 of {linears} linears: thunder ran them in torch, without "
              f"FP8, and said nothing (no {HELD[EXECUTOR]} in the forward trace)")
        sys.exit(0)
    verdict = "TE ran every linear" if held == linears else f"another defect: TE ran {held} of {linears} linears"
    print(f"NOT REPRODUCED: {verdict}")
    sys.exit(1)


if __name__ == "__main__":
    main()
