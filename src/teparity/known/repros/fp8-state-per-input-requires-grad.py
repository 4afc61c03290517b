"""A forward whose input requires no grad (an evaluation forward, grad mode on, no backward), between training steps
whose input requires grad, runs in a thunder cache entry of its own with a fresh TE FP8 state, where eager te.Linear
keeps one state. An fp32 MLP of 2 linears (no bias), DelayedScaling: a training step, an evaluation forward, a
training step, each under TE's autocast; thunder.jit (its default cache) with the functional executor first (the
legacy one where there is none). Counts the forward passes that the first linear's input amax history holds after
each step. Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
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
SIZES, LR = (32, 64, 16), 0.05
#: Whether each step trains (its input requires grad, a backward) or evaluates (a forward alone).
TRAINS = (True, False, True)


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


def mlp(linear) -> torch.nn.Sequential:
    """The linears `linear(fan_in, fan_out)` of SIZES, with seeded weights."""
    generator, layers = torch.Generator().manual_seed(0), [linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / layer.weight.shape[1] ** 0.5)
    return torch.nn.Sequential(*layers).cuda()


def forward_passes(thunder, network) -> int | None:
    """The non-zero rows of the first TE linear's input amax history: eager TE's module, or in thunder's forward trace
    of the last call (None: TE holds no linear)."""
    if not hasattr(network, "_lc_cs"):
        return int(network[0].fp8_meta["scaling_fwd"].amax_history[:, 0].ne(0).sum())
    trace = thunder.last_traces(network)[-1]
    for bsym in trace.bound_symbols:
        if bsym.sym.name.startswith("te_linear_"):  # legacy: a TELinear module per linear
            return int(bsym._call_ctx[bsym.sym.name].func.fp8_meta["scaling_fwd"].amax_history[:, 0].ne(0).sum())
        if bsym.sym.name == "te_functional_linear_fwd":  # functional: the recipe state behind its input quantizer
            made = {out.name: b for b in trace.bound_symbols for out in b.flat_proxy_outs}
            state = made[made[bsym.args[3].name].args[0].name]
            return int(state._call_ctx[state.sym.name].state.amax_history[:, 0].ne(0).sum())
    return None


def train(thunder, network, fp8) -> list:
    """A step per entry of TRAINS: the forward passes the FP8 state holds after each."""
    optimizer, seen = torch.optim.SGD(network.parameters(), lr=LR), []
    for step, trains in enumerate(TRAINS):
        generator = torch.Generator().manual_seed(step)
        x = torch.randn(2, 16, SIZES[0], generator=generator).cuda().requires_grad_(trains)
        with fp8():
            y = network(x)
        if trains:
            y.backward(torch.randn(2, 16, SIZES[-1], generator=generator).cuda())
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        seen.append(forward_passes(thunder, network))
    return seen


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
        eager = train(thunder, mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32)), autocast)
        jitted = thunder.jit(mlp(lambda a, b: torch.nn.Linear(a, b, bias=False)), **options)
        seen = train(thunder, jitted, autocast if transform is not None else contextlib.nullcontext)
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: another defect: a run raised {type(error).__name__}: {' '.join(str(error).split())[:300]}")
        sys.exit(1)
    entries = thunder.cache_misses(jitted)
    print(f"steps training {list(TRAINS)}; forward passes in the first linear's input amax history after each step: "
          f"eager TE {eager}, thunder {seen}; thunder compiled {entries} cache entries")
    if None in seen:
        print("NOT REPRODUCED: another defect: TE holds no linear in thunder's forward trace (torch ran them)")
        sys.exit(1)
    if entries == 2 and seen[1] == 1 < eager[1] and seen[2] == 2 < eager[2]:
        print(f"REPRODUCED: the evaluation forward ran in a cache entry of its own whose FP8 state started afresh "
              f"(1 forward pass, eager TE's {eager[1]}), and the training entry, called again, holds only its own "
              f"{seen[2]} (eager TE's {eager[2]})")
        sys.exit(0)
    print(f"NOT REPRODUCED: {'one FP8 state for both, as eager TE' if seen == eager else 'another defect'}")
    sys.exit(1)


if __name__ == "__main__":
    main()
