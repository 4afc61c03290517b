"""On thunder's weekly builds 0.2.5.dev20250706 .. 0.2.5.dev20250803, under activation checkpointing, the backward's
recomputation of a checkpointed TE linear (functional executor) updates the forward FP8 state that the forward already
updated that step: each get_te_fp8_state_N behind a recomputed linear meets te_fp8_amax_and_scale_update once in the
forward trace and again in the backward trace, where TE updates each state once per step (0.2.5.dev20250810 added
_te_activation_checkpointing_transform, which keeps one). An fp32 MLP of 3 linears with GELUs between them, the first
two linears and their GELU under torch.utils.checkpoint (non-reentrant), one training step under TE's FP8 autocast
with thunder.jit and the functional executor first (and its transform); each FP8 state's updates are followed through
the forward and backward traces. Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
import importlib.metadata
import sys

import torch
import torch.utils.checkpoint

#: Where the functional executor lives (module, attribute, its transform), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")]
SIZES, LEAD = (48, 64, 32, 16), (2, 8)
UPDATE = "te_fp8_amax_and_scale_update"


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
    """Every layer but the last linear under torch.utils.checkpoint: the backward recomputes the region's linears."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self[-1](torch.utils.checkpoint.checkpoint(self._head, x, use_reentrant=False))

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        for layer in list(self)[:-1]:
            x = layer(x)
        return x


def updates_by_state(traces: dict) -> dict[str, list[str]]:
    """Each FP8 state symbol (get_te_fp8_state_N, one per linear and direction) -> where it is updated ("forward #i",
    "backward #j"); a state reaches the backward by its proxy's name, or is made again there by the same symbol."""
    state_of = {out.name: b.sym.name for trace in traces.values() for b in trace.bound_symbols
                if b.sym.name.startswith("get_te_fp8_state") for out in b.flat_proxy_outs}
    updates: dict[str, list[str]] = {name: [] for name in set(state_of.values())}
    for label, trace in traces.items():
        for index, b in enumerate(trace.bound_symbols):
            if b.sym.name == UPDATE:
                for state in sorted({state_of[p.name] for p in b.flat_proxy_args if p.name in state_of}):
                    updates[state].append(f"{label} #{index}")
    return updates


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
    layers = [torch.nn.Linear(SIZES[0], SIZES[1], bias=False)]
    for a, b in zip(SIZES[1:], SIZES[2:]):
        layers += [torch.nn.GELU(), torch.nn.Linear(a, b, bias=False)]
    jitted = thunder.jit(Checkpointed(*layers).cuda(), **options)
    x = torch.randn(*LEAD, SIZES[0], device="cuda", requires_grad=True)
    fp8 = te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)
    try:
        with fp8:
            y = jitted(x)
        y.backward(torch.randn_like(y))
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: thunder raised before its traces could be read (another defect): {error!r:.300}")
        sys.exit(1)
    traces = {"forward": thunder.last_traces(jitted)[-1], "backward": thunder.last_backward_traces(jitted)[-1]}
    held = [sum(b.sym.name == "te_functional_linear_fwd" for b in t.bound_symbols) for t in traces.values()]
    updates = updates_by_state(traces)
    twice = {s: where for s, where in updates.items() if [w.split()[0] for w in where] == ["forward", "backward"]}
    wrong = {s: where for s, where in updates.items() if len(where) != 1 and s not in twice}
    print(f"TE linears: {held[0]} in the forward trace, {held[1]} recomputed in the backward; {UPDATE} per FP8 state: "
          f"{dict(sorted(updates.items()))}")
    if held[0] == 0:
        print("NOT REPRODUCED: the functional executor held no linear: torch ran them (another defect)")
        sys.exit(1)
    if twice and not wrong:
        print(f"REPRODUCED: {len(twice)} forward FP8 state(s) of the {held[1]} recomputed TE linears are updated twice in "
              f"one step, once in the forward trace and again in the backward's recomputation: {twice}")
        sys.exit(0)
    if wrong:
        print(f"NOT REPRODUCED: FP8 states updated other than once per step, not this defect's way: {wrong}")
    elif held[1] == 0:
        print("NOT REPRODUCED: every FP8 state is updated once, but the backward recomputes no TE linear (another "
              "defect: thunder saves the checkpointed TE linears)")
    else:
        print(f"NOT REPRODUCED: every FP8 state is updated exactly once per step; {held[1]} TE linears recomputed")
    sys.exit(1)


if __name__ == "__main__":
    main()
