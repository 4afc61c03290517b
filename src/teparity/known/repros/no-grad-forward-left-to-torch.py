"""Under torch.no_grad neither of thunder's TE executors claims a linear: a no-grad trace keeps torch's linear
(thunder.torch.linear) whole, while both executors register TE for prims.linear only, so thunder runs the inference
forward in torch, silently, where eager te.Linear runs it in FP8. An fp32 MLP of 2 linears (no bias); for each TE
executor this thunder has (legacy: it wraps its forward in fp8_autocast itself, with the recipe given to thunder.jit;
functional: under TE's FP8 autocast, with its transform), thunder.jit with it first runs one forward with grad enabled
and one under torch.no_grad; the forward traces say who ran each linear. Needs an FP8 GPU (compute capability 8.9 or
newer) and TransformerEngine."""
import contextlib
import importlib.metadata
import sys

import torch

#: Where each executor lives (module, attribute, what its module defines), newest thunder first.
CANDIDATES = {
    "legacy": [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
               ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear")],
    "functional": [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
                   ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")],
}
SIZES, TOKENS = (32, 64, 16), 16


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def executor_options(thunder, kind: str, recipe) -> "dict | None":
    """thunder.jit's keyword arguments that put the executor first, or None where this thunder has none."""
    for module_name, attribute, marker in CANDIDATES[kind]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, marker) and getattr(module, attribute, None) is not None:
            options = {"executors": [getattr(module, attribute), *thunder.get_default_executors()]}
            if kind == "functional":
                return {**options, "transforms": [getattr(module, marker)()]}
            return {**options, "te_fp8_recipe": recipe}
    return None


def mlp(linear) -> torch.nn.Sequential:
    """The linears `linear(fan_in, fan_out)` of SIZES, with seeded weights."""
    generator, layers = torch.Generator().manual_seed(0), [linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / layer.weight.shape[1] ** 0.5)
    return torch.nn.Sequential(*layers).cuda()


def thunder_forward(thunder, kind: str, recipe, fp8, x: torch.Tensor, grad: bool) -> tuple:
    """One forward of a new thunder.jit with grad enabled or not: (linears TE held in its forward trace, the output
    or what the call raised)."""
    jitted = thunder.jit(mlp(lambda a, b: torch.nn.Linear(a, b, bias=False)), **executor_options(thunder, kind, recipe))
    try:
        with torch.set_grad_enabled(grad), fp8():
            out = jitted(x).detach()
    except Exception as error:  # noqa: BLE001
        out = error
    try:
        names = [bsym.sym.name for bsym in thunder.last_traces(jitted)[-1].bound_symbols]
    except Exception:  # noqa: BLE001  (no trace: it raised before one was made)
        return None, out
    if kind == "legacy":
        return sum(name.startswith("te_linear_") for name in names), out
    return names.count("te_functional_linear_fwd"), out


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
    version = thunder.__version__ if isinstance(thunder.__version__, str) else importlib.metadata.version("lightning-thunder")
    print(f"thunder {version}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    recipe = DelayedScaling()
    te_fp8 = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    x = torch.randn((TOKENS, SIZES[0]), generator=torch.Generator().manual_seed(1)).cuda()
    with torch.no_grad():
        plain = mlp(lambda a, b: torch.nn.Linear(a, b, bias=False))(x)
        with te_fp8():
            eager = mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32))(x)
    print(f"eager TE under torch.no_grad: FP8 linears, {(eager - plain).abs().max().item():.3g} from torch's fp32 output")
    linears, reproduced, outcomes = len(SIZES) - 1, [], []
    for kind in CANDIDATES:
        if executor_options(thunder, kind, recipe) is None:
            print(f"{kind}: this thunder has no {kind} TE executor")
            continue
        fp8 = te_fp8 if kind == "functional" else contextlib.nullcontext  # legacy: thunder enters fp8_autocast
        trained, trained_out = thunder_forward(thunder, kind, recipe, fp8, x, grad=True)
        inferred, out = thunder_forward(thunder, kind, recipe, fp8, x, grad=False)
        if isinstance(trained_out, Exception):  # 0.2.2's and 0.2.3's legacy executor with TE 2.9, once TE holds a linear
            print(f"{kind}: its forward with grad enabled raised {trained_out!r:.200} (another defect)")
        if trained is None or inferred is None or isinstance(out, Exception):
            said = f"raised {out!r:.200}" if isinstance(out, Exception) else "raised before it made a trace"
            outcomes.append(f"{kind}: thunder {said} (another defect)")
        elif trained < linears:
            outcomes.append(f"{kind}: TE held {trained} of {linears} linears even with grad enabled (another defect)")
        elif inferred == 0:
            reproduced.append(kind)
            outcomes.append(f"{kind}: TE held {trained} of {linears} linears with grad enabled, 0 under torch.no_grad: "
                            f"thunder's output is {(out - plain).abs().max().item():.3g} from torch's fp32 one and "
                            f"{(out - eager).abs().max().item():.3g} from eager TE's FP8 one")
        else:
            outcomes.append(f"{kind}: TE held {inferred} of {linears} linears under torch.no_grad "
                            f"({trained} with grad enabled); output {(out - eager).abs().max().item():.3g} from eager TE's")
        print(outcomes[-1])
    if not outcomes:
        cannot("this thunder has neither TE executor")
    if reproduced:
        print(f"REPRODUCED: under torch.no_grad the {' and '.join(reproduced)} TE executor(s) held none of {linears} "
              "linears that they hold with grad enabled: thunder ran the inference forward in torch, without FP8")
        sys.exit(0)
    print(f"NOT REPRODUCED: {'; '.join(outcomes)}")
    sys.exit(1)


if __name__ == "__main__":
    main()
