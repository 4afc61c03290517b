"""thunder's CUDA graph transform (thunder.transforms.cudagraph.CUDAGraphTransform) cannot take a program whose linears
TE holds: compiling the backward, it asserts that the backward trace's tenth symbol unpacks saved_for_backward, which
the TE executors' backward does not do. The same MLP compiles under the transform without TE. An fp32 MLP of 2
linears (no bias), one forward and backward under TE's FP8 autocast, thunder.jit with the functional TE executor first
(and its transform) or the legacy one, then the CUDA graph transform. Needs an FP8 GPU (compute capability 8.9 or newer)
and TransformerEngine."""
import importlib
import importlib.metadata
import sys
import traceback

import torch

#: Each TE executor (module, attribute, what its module defines), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2"),
              ("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear")]
SIZES, TOKENS = (32, 64, 16), 16


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def te_options(thunder, recipe) -> dict:
    """thunder.jit's options of the first TE executor this thunder has (the functional one first)."""
    for module_name, attribute, marker in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, marker) and (executor := getattr(module, attribute)) is not None:
            options = {"executors": [executor, *thunder.get_default_executors()]}
            if marker == "TELinear":
                options["te_fp8_recipe"] = recipe
            else:
                options["transforms"] = [getattr(module, marker)()]
            return options
    cannot("this thunder has no TE executor that imports TransformerEngine")


def mlp() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(a, b, bias=False) for a, b in zip(SIZES, SIZES[1:]))).cuda()


def step(thunder, options: dict, fp8) -> str | None:
    """One forward and backward of the MLP compiled with `options` and the CUDA graph transform: None, or the error."""
    from thunder.transforms.cudagraph import CUDAGraphTransform

    options = {**options, "transforms": [*options.get("transforms", ()), CUDAGraphTransform()]}
    jitted = thunder.jit(mlp(), **options)
    x = torch.randn(TOKENS, SIZES[0], device="cuda", requires_grad=True)
    try:
        with fp8():
            y = jitted(x)
        y.backward(torch.ones_like(y))
    except Exception:  # noqa: BLE001
        return traceback.format_exc()
    return None


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
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    import contextlib

    recipe = DelayedScaling()
    fp8 = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    without_te = step(thunder, {}, contextlib.nullcontext)
    with_te = step(thunder, te_options(thunder, recipe), fp8)
    if without_te is not None:
        print(f"NOT REPRODUCED: the CUDA graph transform fails without TE too (another defect): {without_te.splitlines()[-1]}")
        sys.exit(1)
    if with_te is None:
        print("NOT REPRODUCED: the CUDA graph transform takes the TE program")
        sys.exit(1)
    layout = "transform_trace_post_optimization" in with_te and "unpack_sequence" in with_te
    if layout or "restore_from_saved" in with_te:
        print(with_te[-1200:])
        print("REPRODUCED: the CUDA graph transform compiles the MLP without TE, and raises with TE holding its linears "
              f"({'its assertion of the backward layout' if layout else 'TE restore_from_saved given no saved tensors'})")
        sys.exit(0)
    print(f"NOT REPRODUCED: another error with TE (another defect): {with_te.splitlines()[-1]}")
    sys.exit(1)


if __name__ == "__main__":
    main()
