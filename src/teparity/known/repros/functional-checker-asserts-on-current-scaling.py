"""thunder's functional TE executor of 0.2.5.dev20250831 .. 0.2.6.dev20250928 raises AssertionError while it checks a
linear under Float8CurrentScaling: _linear_checker's check_valid_fp8_shapes handles a delayed recipe and otherwise
asserts `fp8_recipe.mxfp8()`, so any other recipe raises instead of declining, and no program with a linear traces.
An fp32 MLP of 2 linears (no bias), one training forward under TE's FP8 autocast: eager te.Linear with
Float8CurrentScaling, then thunder.jit with the functional executor first (and its transform), once with DelayedScaling
and once with Float8CurrentScaling. Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine 2.2 or
newer (Float8CurrentScaling)."""
import importlib.metadata
import sys
import traceback
import warnings

import torch

#: Where the functional executor lives (module, attribute, its transform), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")]
SIZES, TOKENS = (32, 64, 16), 16


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def executor_options(thunder) -> dict:
    """thunder.jit's keyword arguments that put the functional executor first, with its transform."""
    for module_name, attribute, transform in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, transform):
            executor = getattr(module, attribute)
            if executor is None:
                cannot(f"{module_name}.{attribute} is None: this thunder could not import TransformerEngine")
            return {"executors": [executor, *thunder.get_default_executors()], "transforms": [getattr(module, transform)()]}
    cannot("this thunder has no functional TE executor")


def mlp(linear) -> torch.nn.Sequential:
    """The linears `linear(fan_in, fan_out)` of SIZES, with seeded weights."""
    generator, layers = torch.Generator().manual_seed(0), [linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / layer.weight.shape[1] ** 0.5)
    return torch.nn.Sequential(*layers).cuda()


def thunder_forward(thunder, fp8, x: torch.Tensor) -> tuple:
    """A new thunder.jit's training forward under `fp8`: (linears TE held in the forward trace, the output, what the
    call raised, the executor's warnings that it will not use TE)."""
    jitted = thunder.jit(mlp(lambda a, b: torch.nn.Linear(a, b, bias=False)), **executor_options(thunder))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with fp8:
                out = jitted(x).detach()
        except Exception as error:  # noqa: BLE001
            return None, None, error, []
    names = [bsym.sym.name for bsym in thunder.last_traces(jitted)[-1].bound_symbols]
    declined = [str(w.message) for w in caught if "wont be used" in str(w.message)]
    return names.count("te_functional_linear_fwd"), out, None, declined


def main() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        cannot("no FP8 GPU (compute capability 8.9 or newer)")
    try:
        import thunder
        import transformer_engine
        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    executor_options(thunder)  # this thunder has one
    if not hasattr(recipe, "Float8CurrentScaling"):
        print("NOT REPRODUCED: this TransformerEngine has no Float8CurrentScaling (it came in 2.2): no such recipe to assert on")
        sys.exit(1)
    fp8 = lambda r: te.autocast(enabled=True, recipe=r) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=r)  # noqa: E731
    x = torch.randn((TOKENS, SIZES[0]), generator=torch.Generator().manual_seed(1)).cuda().requires_grad_()
    plain = mlp(lambda a, b: torch.nn.Linear(a, b, bias=False))(x).detach()
    with fp8(recipe.Float8CurrentScaling()):
        eager = mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32))(x).detach()
    print(f"eager TE, Float8CurrentScaling: FP8 linears, {(eager - plain).abs().max().item():.3g} from torch's fp32 output")
    linears = len(SIZES) - 1
    delayed, _, error, _ = thunder_forward(thunder, fp8(recipe.DelayedScaling()), x)
    if error is not None or delayed < linears:
        said = f"raised {error!r:.200}" if error is not None else f"held {delayed} of {linears} linears"
        print(f"NOT REPRODUCED: another defect: under DelayedScaling thunder's functional executor {said}")
        sys.exit(1)
    held, out, error, declined = thunder_forward(thunder, fp8(recipe.Float8CurrentScaling()), x)
    if error is not None:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        print(f"thunder, Float8CurrentScaling: raised {type(error).__name__} at `{frame.line}` in {frame.name}")
        if isinstance(error, AssertionError) and frame.name == "check_valid_fp8_shapes" and "mxfp8" in (frame.line or "mxfp8"):
            print(f"REPRODUCED: under Float8CurrentScaling thunder's functional executor raises AssertionError at "
                  f"`{frame.line}` in _linear_checker's check_valid_fp8_shapes while it traces the first linear, where "
                  f"eager TE runs the linears in FP8 and thunder holds all {linears} under DelayedScaling")
            sys.exit(0)
        print(f"NOT REPRODUCED: another defect: thunder raised {type(error).__name__}, not at the checker's assertion "
              f"({error!s:.200})")
        sys.exit(1)
    print(f"thunder, DelayedScaling: TE held {delayed} of {linears} linears; Float8CurrentScaling: {held} of {linears}"
          + (f", warning {declined[0]!r}" if declined else ", no warning"))
    if held == 0:
        print(f"NOT REPRODUCED: thunder traced it: its functional executor declined every linear under "
              f"Float8CurrentScaling{' with a warning' if declined else ''} (another defect: torch ran them, "
              f"{(out - eager).abs().max().item():.3g} from eager TE's FP8 output)")
        sys.exit(1)
    said = "TE ran every linear" if held == linears else f"another defect: TE ran {held} of {linears} linears"
    print(f"NOT REPRODUCED: thunder traced it: {said} under Float8CurrentScaling (output "
          f"{(out - eager).abs().max().item():.3g} from eager TE's)")
    sys.exit(1)


if __name__ == "__main__":
    main()
