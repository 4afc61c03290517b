"""thunder's state_dict holds no TE FP8 state: train 3 steps, save state_dict(), load it into a freshly built network,
compile that again and train 3 more, and the resumed run starts a fresh FP8 state (its first step after the checkpoint
quantizes with scale 1 and an empty amax history), where eager te.Linear saves the state in _extra_state and resumes
exactly as its uninterrupted run. An fp32 MLP of 2 linears (no bias), DelayedScaling, SGD; thunder.jit with the
functional executor first (the legacy one where there is none). Needs an FP8 GPU (compute capability 8.9 or newer) and
TransformerEngine."""
import contextlib
import importlib
import importlib.metadata
import os
import sys

import torch

#: The TE executors (module, attribute, what the module defines), the functional one first, newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2"),
              ("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear")]
SIZES, TOKENS, STEPS, LR = (32, 64, 16), 16, 6, 0.05
RESUME = STEPS // 2


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


def train(build, steps: range, saved: dict | None = None) -> tuple[list[torch.Tensor], dict]:
    """Steps `steps` of `build(saved)` (a network and its FP8 context; loaded from `saved` where given): the outputs,
    and the state_dict after the last step."""
    network, fp8 = build(saved)
    optimizer, outputs = torch.optim.SGD(network.parameters(), lr=LR), []
    for step in steps:
        generator = torch.Generator().manual_seed(step)
        x = torch.randn(TOKENS, SIZES[0], generator=generator).cuda()
        with fp8():
            y = network(x)
        y.backward(torch.randn(TOKENS, SIZES[-1], generator=generator).cuda())
        outputs.append(y.detach().clone())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return outputs, network.state_dict()


def parted(got: list, want: list) -> list[float]:
    return [(a - b).abs().max().item() for a, b in zip(got, want)]


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
    os.environ["NVTE_ALLOW_UNSAFE_PICKLE_EXTRA_STATE"] = "1"  # TE 2.20+ unpickles its own checkpoint's FP8 state only so
    recipe = DelayedScaling()
    autocast = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    executor, transform = find_executor()
    options = {"executors": [executor, *thunder.get_default_executors()]}
    if transform is None:  # legacy: the recipe goes to thunder.jit, which wraps its forward in fp8_autocast itself
        options["te_fp8_recipe"] = recipe

    def eager(saved: dict | None) -> tuple:
        network = mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32))
        if saved is not None:
            network.load_state_dict(saved)
        return network, autocast

    def jitted(saved: dict | None) -> tuple:
        plain = mlp(lambda a, b: torch.nn.Linear(a, b, bias=False))
        if saved is not None:
            plain.load_state_dict(saved)
        run_options = dict(options, transforms=[transform()]) if transform is not None else options
        return thunder.jit(plain, **run_options), autocast if transform is not None else contextlib.nullcontext

    try:
        eager_whole, _ = train(eager, range(STEPS))
        eager_first, saved = train(eager, range(RESUME))
        eager_rest, _ = train(eager, range(RESUME, STEPS), saved)
        thunder_whole, _ = train(jitted, range(STEPS))
        thunder_first, saved = train(jitted, range(RESUME))
        thunder_rest, _ = train(jitted, range(RESUME, STEPS), saved)
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: another defect: a run raised {type(error).__name__}: {' '.join(str(error).split())[:300]}")
        sys.exit(1)
    fp8_keys = [key for key in saved if key.endswith("_extra_state")]
    eager_gap = max(parted(eager_first + eager_rest, eager_whole))
    thunder_gap = parted(thunder_first + thunder_rest, thunder_whole)
    print(f"keys of thunder's state_dict: {sorted(saved)}; max |resumed - uninterrupted| of the outputs: eager TE "
          f"{eager_gap:.3g}; thunder by step {[f'{d:.3g}' for d in thunder_gap]} (resumed after step {RESUME - 1})")
    if eager_gap != 0:
        print(f"NOT REPRODUCED: eager TE itself does not resume exactly here ({eager_gap:.3g}): nothing to compare with")
        sys.exit(1)
    if not fp8_keys and max(thunder_gap[:RESUME]) == 0 and thunder_gap[RESUME] > 0:
        print(f"REPRODUCED: thunder's state_dict holds no FP8 state (no _extra_state key), and the run resumed from it "
              f"parts from thunder's uninterrupted run from its first step after the checkpoint by {thunder_gap[RESUME]:.3g}, "
              "where eager TE resumes exactly")
        sys.exit(0)
    print(f"NOT REPRODUCED: {'thunder resumes as its uninterrupted run' if max(thunder_gap) == 0 else 'another defect'}"
          f"{f' (its state_dict saves FP8 state: {fp8_keys})' if fp8_keys else ''}")
    sys.exit(1)


if __name__ == "__main__":
    main()
