"""thunder's functional TE executor of 0.2.3 .. 0.2.5.dev20250824 asks a Float8BlockScaling recipe state for 2
forward quantizers (input, weight), and TE's Float8BlockScalingRecipeState.make_quantizers asserts that the count is a
multiple of 3: the first call of any program with a linear raises. A bf16 linear (no bias) under te.autocast with
Float8BlockScaling; eager te.Linear first, then thunder.jit with the functional executor first (and its transform).
Needs compute capability 9.0 or newer, CUDA 12.9 or newer and a TransformerEngine with Float8BlockScaling."""
import importlib
import importlib.metadata
import sys
import traceback

import torch

#: Where the functional executor lives (module, attribute, its transform), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")]
IN, OUT, TOKENS = 256, 128, 128


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
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        cannot("no GPU of compute capability 9.0 or newer (TE's Float8BlockScaling needs it)")
    if float(torch.version.cuda or 0) < 12.9:
        cannot(f"torch's CUDA {torch.version.cuda} is older than 12.9 (TE's Float8BlockScaling needs 12.9+)")
    try:
        import thunder
        import transformer_engine
        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe as te_recipe
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    if not hasattr(te_recipe, "Float8BlockScaling"):
        cannot(f"TransformerEngine {transformer_engine.__version__} has no Float8BlockScaling")
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    recipe = te_recipe.Float8BlockScaling()
    autocast = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    x = torch.randn(TOKENS, IN, generator=torch.Generator().manual_seed(0)).to("cuda", torch.bfloat16)
    eager = te.Linear(IN, OUT, bias=False, params_dtype=torch.bfloat16)
    with autocast():
        eager(x).sum().backward()  # eager TE runs the recipe here
    plain = torch.nn.Linear(IN, OUT, bias=False).to("cuda", torch.bfloat16)
    jitted = thunder.jit(plain, **executor_options(thunder))
    try:
        with autocast():
            jitted(x).sum().backward()
    except AssertionError as error:
        text = "".join(traceback.format_exception(error))
        if "num_quantizers % 3" in text and "make_quantizers" in text:
            print("REPRODUCED: thunder's functional executor raised TE's AssertionError 'assert self.num_quantizers % 3 == "
                  "0' in Float8BlockScalingRecipeState.make_quantizers: it asks a block-scaling state for 2 forward "
                  "quantizers, where eager te.Linear ran the recipe")
            sys.exit(0)
        print(f"NOT REPRODUCED: another defect: an AssertionError elsewhere: {' '.join(text.split())[-300:]}")
        sys.exit(1)
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: another defect: thunder raised {type(error).__name__}: {' '.join(str(error).split())[:300]}")
        sys.exit(1)
    held = [b.sym.name for b in thunder.last_traces(jitted)[-1].bound_symbols if b.sym.name == "te_functional_linear_fwd"]
    print(f"NOT REPRODUCED: thunder ran the linear {'in TE' if held else 'in torch (the executor declined it)'}: no "
          "assertion on the quantizer count")
    sys.exit(1)


if __name__ == "__main__":
    main()
