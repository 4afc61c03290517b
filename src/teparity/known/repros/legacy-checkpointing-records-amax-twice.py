"""With thunder's legacy TE executor, a linear under activation checkpointing records its amaxes a second time when the
backward recomputes it, after the step's amax update: TE's update rolls each amax history and zeroes row 0 for the next
forward, and the recomputation (the same TELinear, its fp8_meta) fills that row again, so the next step's scales and
this step's gradients part from eager TE's. An fp32 MLP of 3 linears, the first two under torch.utils.checkpoint
(non-reentrant), one training step: eager TE's te.Linear under TE's FP8 autocast (no checkpointing), then thunder.jit
with the legacy executor first (it wraps its forward in fp8_autocast itself, with the recipe given to thunder.jit); then
row 0 of the first linear's input amax history on each side. Needs an FP8 GPU (compute capability 8.9 or newer) and
TransformerEngine."""
import importlib.metadata
import sys

import torch
import torch.utils.checkpoint

#: Where the legacy executor lives (module, attribute), newest thunder first; its module defines TELinear.
CANDIDATES = [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex")]
SIZES, BATCH = (48, 64, 32, 16), 16


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


class Checkpointed(torch.nn.Sequential):
    """Every linear but the last under torch.utils.checkpoint: the backward recomputes the first (the second's input)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self[-1](torch.utils.checkpoint.checkpoint(self._head, x, use_reentrant=False))

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        for layer in list(self)[:-1]:
            x = layer(x)
        return x


def input_amaxes(module) -> tuple[float, float]:
    """Row 0 (the slot the next forward fills; TE's update zeroes it) and row -1 (the newest amax) of a TE module's
    input amax history."""
    history = module.fp8_meta["scaling_fwd"].amax_history
    return history[0, 0].item(), history[-1, 0].item()


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
    torch.manual_seed(0)
    net = Checkpointed(*(torch.nn.Linear(a, b, bias=False) for a, b in zip(SIZES, SIZES[1:]))).cuda()
    eager = torch.nn.Sequential(*(te.Linear(a, b, bias=False, params_dtype=torch.float32) for a, b in zip(SIZES, SIZES[1:])))
    with torch.no_grad():
        for mine, theirs in zip(eager, net):
            mine.weight.copy_(theirs.weight)
    x, grad_out = torch.randn(BATCH, SIZES[0], device="cuda"), torch.randn(BATCH, SIZES[-1], device="cuda")
    fp8 = te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)
    with fp8:
        y = eager.cuda()(x.clone().requires_grad_(True))
    y.backward(grad_out)
    eager_row0, eager_newest = input_amaxes(eager[0])  # read now: every later TE update rolls every history
    jitted = thunder.jit(net, executors=[executor, *thunder.get_default_executors()], te_fp8_recipe=recipe)
    try:
        jitted(x.clone().requires_grad_(True)).backward(grad_out)  # the legacy executor enters fp8_autocast itself
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: thunder raised before any amax could be read (another defect): {error!r:.300}")
        sys.exit(1)
    forward, backward = thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]
    linears = [b for b in forward.bound_symbols if b.sym.name.startswith("te_linear_")]
    if not linears:
        print(f"NOT REPRODUCED: the legacy executor held none of the {len(SIZES) - 1} linears: torch ran them "
              "(another defect: from TE 2.10 the legacy executor cannot import TE)")
        sys.exit(1)
    first = linears[0]._call_ctx[linears[0].sym.name]  # functools.partial(TELinear, is_grad_enabled=...)
    row0, newest = input_amaxes(getattr(first, "func", first))
    rerun = [b.sym.name for b in backward.bound_symbols if b.sym.name.startswith("te_linear_")]
    grad = (net[0].weight.grad - eager[0].weight.grad).abs().max().item()
    print(f"backward trace reruns {rerun or 'no TE linear'}; first linear's input amax history after the step: "
          f"row 0 {row0:.4g}, newest {newest:.4g} (eager TE: row 0 {eager_row0:.4g}, newest {eager_newest:.4g}); "
          f"max |first weight's grad - eager TE's| {grad:.3g}")
    if eager_row0 == 0.0 and row0 != 0.0:
        print(f"REPRODUCED: after one step thunder's checkpointed first linear holds input amax {row0:.4g} in row 0 of "
              f"its history, the row TE's update zeroed, where eager TE's holds 0: the backward's recomputation "
              f"recorded it again (its weight gradient is already {grad:.3g} from eager TE's)")
        sys.exit(0)
    print(f"NOT REPRODUCED: row 0 of the first linear's input amax history is {row0:.4g} on thunder's side, "
          f"{eager_row0:.4g} on eager TE's")
    sys.exit(1)


if __name__ == "__main__":
    main()
