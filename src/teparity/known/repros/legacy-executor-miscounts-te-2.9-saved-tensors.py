"""thunder 0.2.2's and 0.2.3's legacy TE executor cannot unpack what TransformerEngine 2.9's _Linear.forward saves for
the backward: the computation trace unpacks each te_linear_N call's saved tensors into as many names as the executor's
meta predicts (5 in 0.2.2; 8 in 0.2.3, counted from an eager te.Linear), TE 2.9 hands back 6, and the forward raises
ValueError ('too many' or 'not enough values to unpack'). An fp32 MLP of 2 linears, one training step: eager TE's
te.Linear under TE's FP8 autocast, then thunder.jit with the legacy executor first (it wraps its forward in
fp8_autocast itself, with the recipe given to thunder.jit). Needs an FP8 GPU (compute capability 8.9 or newer) and
TransformerEngine."""
import importlib.metadata
import re
import sys
import traceback

import torch

#: Where the legacy executor lives (module, attribute), newest thunder first; its module defines TELinear.
CANDIDATES = [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex")]
SIZES, BATCH = (32, 64, 16), 16


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def legacy_executor():
    for module_name, attribute in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, "TELinear"):
            if getattr(module, attribute, None) is None:
                cannot(f"{module_name}.{attribute} is None: this thunder could not import TransformerEngine")
            return getattr(module, attribute)
    cannot("this thunder has no legacy TE executor (thunder removed it in 0.2.7.dev20251130)")


def mlp() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(a, b, bias=False) for a, b in zip(SIZES, SIZES[1:]))).cuda()


def te_twin(te, net: torch.nn.Sequential) -> torch.nn.Sequential:
    """The same MLP of te.Linear, with the same weights."""
    twin = torch.nn.Sequential(*(te.Linear(m.in_features, m.out_features, bias=False, params_dtype=torch.float32)
                                 for m in net))
    with torch.no_grad():
        for mine, theirs in zip(twin, net):
            mine.weight.copy_(theirs.weight)
    return twin.cuda()


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
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, "
          f"torch {torch.__version__}")
    executor = legacy_executor()
    recipe = DelayedScaling()
    fp8 = te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)
    x = torch.randn(BATCH, SIZES[0], device="cuda")
    grad_out = torch.randn(BATCH, SIZES[-1], device="cuda")
    net = mlp()
    eager = te_twin(te, net)
    with fp8:
        y = eager(x.clone().requires_grad_(True))
    y.backward(grad_out)
    print("eager TE: te.Linear ran its FP8 forward and backward")
    jitted = thunder.jit(net, executors=[executor, *thunder.get_default_executors()], te_fp8_recipe=recipe)
    try:
        jitted(x.clone().requires_grad_(True)).backward(grad_out)  # the legacy executor enters fp8_autocast itself
    except Exception as error:  # noqa: BLE001
        frames = traceback.extract_tb(error.__traceback__)
        line = (frames[-1].line or "").strip() if frames else ""
        print(f"thunder raised {type(error).__name__}: {error}\n  in {frames[-1].filename if frames else '?'}: {line}")
        if isinstance(error, ValueError) and "values to unpack" in str(error) and re.search(r"= te_linear_\d+\(", line):
            print(f"REPRODUCED: eager TE trains the MLP; thunder's legacy executor raises ValueError ({error}) where its "
                  f"computation trace unpacks the saved tensors of a TE linear: `{line}`")
            sys.exit(0)
        print(f"NOT REPRODUCED: thunder raised, but not at the unpack of a te_linear_N call (another defect): {error!r:.200}")
        sys.exit(1)
    held = sum(b.sym.name.startswith("te_linear_") for b in thunder.last_traces(jitted)[-1].bound_symbols)
    if held == 0:
        print(f"NOT REPRODUCED: thunder ran, but the legacy executor held none of the {len(SIZES) - 1} linears: torch ran "
              "them (another defect: from TE 2.10 the legacy executor cannot import TE)")
        sys.exit(1)
    worst = max((a.weight.grad - b.weight.grad).abs().max().item() for a, b in zip(net, eager))
    print(f"NOT REPRODUCED: thunder's legacy executor ran {held} TE linears and unpacked their saved tensors "
          f"(max |weight grad - eager TE's| {worst:.3g})")
    sys.exit(1)


if __name__ == "__main__":
    main()
