"""Up to thunder 0.2.5.dev20250629, thunder.jit with the functional TE executor recomputes none of a checkpointed
region's TE linears: the backward trace has no te_functional_linear_fwd, so the region keeps its activations, as if
torch.utils.checkpoint were not there. An fp32 MLP of 3 linears, the first two under torch.utils.checkpoint
(non-reentrant): the second consumes the first's output, which the backward must recompute. One training step under
TE's FP8 autocast with the functional executor first (and its transform), and the same program with thunder's torch
executor alone, whose backward recomputes that linear. Needs an FP8 GPU (compute capability 8.9 or newer) and TE."""
import importlib.metadata
import sys

import torch
import torch.utils.checkpoint

#: Where the functional executor lives (module, attribute, its transform), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")]
SIZES, BATCH = (48, 64, 32, 16), 16


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
    cannot("this thunder has no functional TE executor (it first shipped in 0.2.3)")


class Checkpointed(torch.nn.Sequential):
    """Every linear but the last under torch.utils.checkpoint: the backward recomputes the first (the second's input)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self[-1](torch.utils.checkpoint.checkpoint(self._head, x, use_reentrant=False))

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        for layer in list(self)[:-1]:
            x = layer(x)
        return x


def count(trace, name: str) -> int:
    return sum(b.sym.name == name for b in trace.bound_symbols)


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
    options = executor_options(thunder)
    recipe = DelayedScaling()
    torch.manual_seed(0)
    net = Checkpointed(*(torch.nn.Linear(a, b, bias=False) for a, b in zip(SIZES, SIZES[1:]))).cuda()
    x, grad_out = torch.randn(BATCH, SIZES[0], device="cuda"), torch.randn(BATCH, SIZES[-1], device="cuda")
    plain = thunder.jit(net, executors=[thunder.extend.get_executor("torch")])
    plain(x.clone().requires_grad_(True)).backward(grad_out)
    torch_recomputed = count(thunder.last_backward_traces(plain)[-1], "linear")
    jitted = thunder.jit(net, **options)
    fp8 = te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)
    try:
        with fp8:
            y = jitted(x.clone().requires_grad_(True))
        y.backward(grad_out)
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: thunder raised before its backward trace could be read (another defect): {error!r:.300}")
        sys.exit(1)
    held = count(thunder.last_traces(jitted)[-1], "te_functional_linear_fwd")
    recomputed = count(thunder.last_backward_traces(jitted)[-1], "te_functional_linear_fwd")
    print(f"torch executor: the backward trace recomputes {torch_recomputed} linear(s); functional TE executor: it holds "
          f"{held} of {len(SIZES) - 1} linears in the forward trace and recomputes {recomputed} in the backward")
    if held == 0:
        print("NOT REPRODUCED: the functional executor held no linear: torch ran them (another defect)")
        sys.exit(1)
    if recomputed == 0 and torch_recomputed > 0:
        print(f"REPRODUCED: under activation checkpointing the backward recomputes none of the functional executor's TE "
              f"linears (0 te_functional_linear_fwd; thunder's torch executor recomputes {torch_recomputed} linear): the "
              "checkpointed region's TE linears keep their activations")
        sys.exit(0)
    if recomputed == 0:
        print("NOT REPRODUCED: thunder recomputes no linear of the region even with its torch executor: not this defect")
        sys.exit(1)
    print(f"NOT REPRODUCED: the backward recomputes {recomputed} of the checkpointed region's TE linears")
    sys.exit(1)


if __name__ == "__main__":
    main()
