"""Up to thunder 0.2.5.dev20250629, thunder.jit with the functional TE executor fails in the backward of a checkpointed
region that has a GELU after a TE linear: the GELU's backward reads its forward input, that linear's output, which the
backward neither receives nor recomputes (UnboundLocalError: cannot access local variable 't74' ...). An fp32 MLP of 3
linears with GELUs between them, the first two linears and their GELUs under torch.utils.checkpoint (non-reentrant), one
training step under TE's FP8 autocast: eager TE's te.Linear (no checkpointing), then thunder.jit with the functional
executor first (and its transform). Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
import importlib.metadata
import sys
import traceback

import torch
import torch.utils.checkpoint

#: Where the functional executor lives (module, attribute, its transform), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")]
SIZES, LEAD = (48, 64, 32, 16), (2, 8)


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
    """Every layer but the last linear under torch.utils.checkpoint: the backward recomputes the region."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self[-1](torch.utils.checkpoint.checkpoint(self._head, x, use_reentrant=False))

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        for layer in list(self)[:-1]:
            x = layer(x)
        return x


def mlp(linear) -> list[torch.nn.Module]:
    """The MLP's layers: ``linear(a, b)`` for each pair of sizes, a GELU between each two."""
    layers = [linear(SIZES[0], SIZES[1])]
    for a, b in zip(SIZES[1:], SIZES[2:]):
        layers += [torch.nn.GELU(), linear(a, b)]
    return layers


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
    fp8 = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    torch.manual_seed(0)
    net = Checkpointed(*mlp(lambda a, b: torch.nn.Linear(a, b, bias=False))).cuda()
    eager = torch.nn.Sequential(*mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32))).cuda()
    with torch.no_grad():
        for mine, theirs in zip(eager, net):
            if isinstance(theirs, torch.nn.Linear):
                mine.weight.copy_(theirs.weight)
    x = torch.randn(*LEAD, SIZES[0], device="cuda")
    grad_out = torch.randn(*LEAD, SIZES[-1], device="cuda")
    with fp8():
        y = eager(x.clone().requires_grad_(True))
    y.backward(grad_out)
    print("eager TE: te.Linear ran its FP8 forward and backward")
    jitted = thunder.jit(net, **options)
    try:
        with fp8():
            y = jitted(x.clone().requires_grad_(True))
        y.backward(grad_out)
    except Exception as error:  # noqa: BLE001
        frames = traceback.extract_tb(error.__traceback__)
        last = frames[-1] if frames else None
        line = (last.line or "").strip() if last else ""
        print(f"thunder.jit raised {type(error).__name__}: {error}\n  in {last.name if last else '?'} "
              f"({last.filename if last else '?'}): {line}")
        if isinstance(error, UnboundLocalError) and last is not None and last.name == "backward_fn":
            print(f"REPRODUCED: eager TE trains the MLP; thunder.jit's backward of the checkpointed region raises "
                  f"UnboundLocalError ({error}) where it reads a forward tensor it never computes: `{line}`")
            sys.exit(0)
        print(f"NOT REPRODUCED: thunder.jit raised, but not this defect's unbound tensor in backward_fn: {error!r:.200}")
        sys.exit(1)
    held = sum(b.sym.name == "te_functional_linear_fwd" for b in thunder.last_traces(jitted)[-1].bound_symbols)
    if held == 0:
        print("NOT REPRODUCED: thunder.jit ran the step, but the functional executor held no linear: torch ran them "
              "(another defect)")
        sys.exit(1)
    recomputed = sum(b.sym.name == "te_functional_linear_fwd" for b in thunder.last_backward_traces(jitted)[-1].bound_symbols)
    print(f"NOT REPRODUCED: thunder.jit ran the step: TE held {held} linears, its backward recomputed {recomputed} of them")
    sys.exit(1)


if __name__ == "__main__":
    main()
