"""thunder's TE executors keep an FP8 state per call of a linear: a linear called twice in one forward (shared
weights) is two TE linears in thunder's trace, each with its own amax history and scales, where eager te.Linear keeps
one state for both calls (both calls' amaxes in one history). An fp32 network first -> shared -> shared -> last (no
bias), DelayedScaling, 3 SGD steps; thunder.jit with the functional executor first (the legacy one where there is
none). Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
import contextlib
import importlib
import importlib.metadata
import sys

import torch

#: The TE executors (module, attribute, what the module defines), the functional one first, newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2"),
              ("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear")]
SIZES, TOKENS, STEPS, LR = (32, 64, 16), 16, 3, 0.05


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def find_executor() -> tuple:
    """(the executor, its transform class: None for the legacy one)."""
    for module_name, attribute, marker in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, marker):
            if (executor := getattr(module, attribute)) is None:
                cannot(f"{module_name}.{attribute} is None: this thunder could not import TransformerEngine")
            return executor, None if marker == "TELinear" else getattr(module, marker)
    cannot("this thunder has no TE executor")


class Shared(torch.nn.Module):
    """Three linears of SIZES, the square middle one called twice, with seeded weights."""

    def __init__(self, linear) -> None:
        super().__init__()
        width, generator = SIZES[1], torch.Generator().manual_seed(0)
        self.first, self.shared, self.last = linear(SIZES[0], width), linear(width, width), linear(width, SIZES[-1])
        with torch.no_grad():
            for layer in (self.first, self.shared, self.last):
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / layer.weight.shape[1] ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(self.shared(self.shared(self.first(x))))


def train(network, fp8) -> list[torch.Tensor]:
    optimizer, outputs = torch.optim.SGD(network.parameters(), lr=LR), []
    for step in range(STEPS):
        generator = torch.Generator().manual_seed(step)
        x = torch.randn(TOKENS, SIZES[0], generator=generator).cuda()
        with fp8():
            y = network(x)
        y.backward(torch.randn(TOKENS, SIZES[-1], generator=generator).cuda())
        outputs.append(y.detach().clone())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return outputs


def states_of_the_shared_weight(trace) -> list:
    """The FP8 state objects of the forward trace's TE linears on the shared weight, one per call."""
    made = {out.name: b for b in trace.bound_symbols for out in b.flat_proxy_outs}
    states = []
    for bsym in trace.bound_symbols:
        name = bsym.sym.name
        if name.startswith("te_linear_") and bsym.args[1].name.endswith("shared_weight"):  # legacy: a TELinear each
            states.append(bsym._call_ctx[name].func)
        elif name == "te_functional_linear_fwd" and bsym.args[1].name.endswith("shared_weight"):
            state = made[made[bsym.args[3].name].args[0].name]  # the recipe state behind its input quantizer
            states.append(state._call_ctx[state.sym.name].state)
    return states


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
    recipe = DelayedScaling()
    autocast = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    executor, transform = find_executor()
    options = {"executors": [executor, *thunder.get_default_executors()]}
    if transform is None:  # legacy: the recipe goes to thunder.jit, which wraps its forward in fp8_autocast itself
        options["te_fp8_recipe"] = recipe
    else:
        options["transforms"] = [transform()]
    try:
        eager = train(Shared(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32)).cuda(), autocast)
        jitted = thunder.jit(Shared(lambda a, b: torch.nn.Linear(a, b, bias=False)).cuda(), **options)
        outputs = train(jitted, autocast if transform is not None else contextlib.nullcontext)
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: another defect: a run raised {type(error).__name__}: {' '.join(str(error).split())[:300]}")
        sys.exit(1)
    states = states_of_the_shared_weight(thunder.last_traces(jitted)[-1])
    distinct = len({id(state) for state in states})
    gaps = [(a - b).abs().max().item() for a, b in zip(outputs, eager)]
    print(f"thunder's forward trace: {len(states)} TE linears on the shared weight, {distinct} FP8 state(s) among them "
          f"(eager TE: one module, one state); max |thunder - eager TE| of the outputs by step {[f'{g:.3g}' for g in gaps]}")
    if len(states) < 2:
        print("NOT REPRODUCED: another defect: TE holds fewer than the shared linear's 2 calls (torch ran them)")
        sys.exit(1)
    if distinct == 2 and gaps[0] < 1e-3 and max(gaps[1:]) > 0:
        print(f"REPRODUCED: each call of the shared linear has an FP8 state of its own in thunder's trace; from step 1 "
              f"on its scales are not eager TE's one state's, and the outputs part by up to {max(gaps):.3g}")
        sys.exit(0)
    print(f"NOT REPRODUCED: {'one FP8 state for both calls, as eager TE' if distinct == 1 else 'another defect'}")
    sys.exit(1)


if __name__ == "__main__":
    main()
