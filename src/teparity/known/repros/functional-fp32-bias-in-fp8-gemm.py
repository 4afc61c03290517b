"""thunder's functional TE executor passes an fp32 bias into TE's FP8 GEMM, which cuBLASLt rejects ("Unable to find
suitable cuBLAS GEMM algorithm"); eager te.Linear casts the bias to bf16 first. An fp32 MLP of 3 linears with biases,
one training step under TE's FP8 autocast, eager TE's te.Linear and then thunder.jit with the functional executor first
(and its transform). Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
import importlib.metadata
import sys

import torch

#: Where the functional executor lives (module, attribute, its transform), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")]
SIZES = (48, 64, 32, 16)


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
    fp8 = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    x = torch.randn(2, 8, SIZES[0], device="cuda", requires_grad=True)
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    eager = torch.nn.Sequential(*(te.Linear(a, b, bias=True, params_dtype=torch.float32) for a, b in zip(SIZES, SIZES[1:])))
    with fp8():
        eager.cuda()(x).sum().backward()  # eager TE casts the bias for its FP8 GEMM
    torch.manual_seed(0)
    net = torch.nn.Sequential(*(torch.nn.Linear(a, b, bias=True) for a, b in zip(SIZES, SIZES[1:]))).cuda()
    jitted = thunder.jit(net, **executor_options(thunder))
    try:
        with fp8():
            jitted(x).sum().backward()
    except RuntimeError as error:
        if "Unable to find suitable cuBLAS GEMM algorithm" in str(error):
            print(f"REPRODUCED: eager TE trains the fp32 linears with a bias; thunder's functional executor raises {error}")
            sys.exit(0)
        print(f"NOT REPRODUCED: thunder raised, but not this defect's error: {error}")
        sys.exit(1)
    print("NOT REPRODUCED: thunder's functional executor ran the fp32 linears with a bias, as eager TE does")
    sys.exit(1)


if __name__ == "__main__":
    main()
