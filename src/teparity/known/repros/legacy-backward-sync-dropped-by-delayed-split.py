"""thunder's legacy TE executor is to insert its backward FP8 sync (te_sync_fp8_meta_bwd, which calls TE's
FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=False)) into every backward trace, just before the return.
From 0.2.4.dev20250608 thunder.jit splits the joint trace itself (delay_trace_split=True) and skips the function that
inserts it: the backward trace has no sync and none runs. No TransformerEngine or GPU needed: the sync is inserted
whenever the executor is listed, TE or not; a 2-layer MLP on the CPU (which TE does not claim), 3 training steps, the
sync's TE call replaced by a recorder; the backward trace's symbols and the recorded calls say whether it ran."""
import importlib.metadata
import sys

import torch

#: Where the legacy executor lives (module, attribute), newest thunder first; its module defines TELinear.
CANDIDATES = [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex")]
SYNC, SIZES, BATCH, STEPS = "te_sync_fp8_meta_bwd", (32, 64, 16), 16, 3


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def legacy_executor():
    """The legacy TE executor's module and executor object."""
    for module_name, attribute in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, "TELinear") and getattr(module, attribute, None) is not None:
            return module, getattr(module, attribute)
    cannot("this thunder has no legacy TE executor (removed in 0.2.7.dev20251130)")


class Recorder:
    """Stands in for TE's FP8GlobalStateManager where the sync looks it up: records each call's `forward`."""
    calls: list = []

    @classmethod
    def reduce_and_update_fp8_tensors(cls, forward: bool = True, *args, **kwargs) -> None:
        cls.calls.append(forward)


def main() -> None:
    try:
        import thunder
    except Exception as error:  # noqa: BLE001
        cannot(f"lightning-thunder does not import: {error}")
    module, executor = legacy_executor()
    try:
        import transformer_engine
        te_version = transformer_engine.__version__
    except Exception:  # noqa: BLE001
        te_version = "none"
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {te_version}, torch {torch.__version__}")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(SIZES[0], SIZES[1]), torch.nn.GELU(), torch.nn.Linear(SIZES[1], SIZES[2]))
    jitted = thunder.jit(net, executors=[executor, *thunder.get_default_executors()])
    had = module.__dict__.get("FP8GlobalStateManager")  # TE's class, or nothing without TE
    module.FP8GlobalStateManager = Recorder
    per_step = []
    try:
        for _ in range(STEPS):
            before = Recorder.calls.count(False)
            jitted(torch.randn(BATCH, SIZES[0])).sum().backward()
            per_step.append(Recorder.calls.count(False) - before)
    except Exception as error:  # noqa: BLE001
        print(f"NOT REPRODUCED: thunder raised before a backward completed (another defect): {error!r:.300}")
        sys.exit(1)
    finally:
        if had is None:
            del module.FP8GlobalStateManager
        else:
            module.FP8GlobalStateManager = had
    backward = [bsym.sym.name for bsym in thunder.last_backward_traces(jitted)[-1].bound_symbols]
    in_trace = backward.count(SYNC)
    print(f"{module.__name__}: {SYNC} in the backward trace {in_trace} time(s) (its last symbols: {backward[-3:]}); "
          f"backward syncs run per step: {per_step}")
    if in_trace == 0 and not any(per_step):
        print(f"REPRODUCED: the backward trace has no {SYNC} and no backward FP8 sync ran in {STEPS} steps "
              f"(expected 1 per backward)")
        sys.exit(0)
    if in_trace == 1 and per_step == [1] * STEPS:
        print(f"NOT REPRODUCED: {SYNC} is in the backward trace once and ran once per backward ({per_step})")
        sys.exit(1)
    print(f"NOT REPRODUCED: another defect: {SYNC} {in_trace} time(s) in the trace, syncs run per step {per_step}")
    sys.exit(1)


if __name__ == "__main__":
    main()
