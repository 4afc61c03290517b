"""What the gate does in a rank around each run, whatever launched it (fresh, warm or torchrun): once
per process, import TE and thunder (``preload``, timed in the rank's log; a warm rank runs it as its
prologue) and apply the injected mutations (``--teparity-inject``); before every run, reset what would
couple it to an earlier one in the same process."""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

_mutations_applied = False
_preloaded = False


#: A folder: each run in a rank writes its cProfile there (``NAME-rankR-PID-N.prof``), to see where a
#: side's seconds go.
PROFILE_VARIABLE = "TEPARITY_PROFILE_DIR"
_runs = 0


def in_rank(rank: int, world_size: int, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(rank, world_size, *args)`` after the process's preload and mutations, and a reset."""
    global _mutations_applied, _runs
    if not _preloaded:
        preload()
    if not _mutations_applied:
        from teparity.tools import mutations

        mutations.apply_from_env()
        _mutations_applied = True
    reset_between_runs()
    if not (folder := os.environ.get(PROFILE_VARIABLE)):
        return fn(rank, world_size, *args)
    import cProfile

    _runs += 1
    profile = cProfile.Profile()
    try:
        return profile.runcall(fn, rank, world_size, *args)
    finally:
        profile.dump_stats(os.path.join(folder, f"{fn.__name__}-rank{rank}-{os.getpid()}-{_runs}.prof"))


def reset_between_runs() -> None:
    """What couples two runs in one process, reset before each: TE's global FP8 state and amax buffers,
    torch's compile caches, the RNG, freed memory. Fresh ranks run it too, so both kinds start alike."""
    import torch

    if "transformer_engine.pytorch" in sys.modules:
        from teparity.stack.versions import fp8_global_state_manager

        fp8_global_state_manager().reset()
    if "torch._dynamo" in sys.modules:  # nothing compiled before dynamo was imported
        torch._dynamo.reset()
    torch.manual_seed(0)
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def preload() -> None:
    """Import TE (where it can run) and thunder and initialise CUDA, logging the time of each: what every
    rank pays once (a warm rank before its first run, a fresh rank before its only one)."""
    global _preloaded
    import torch

    from teparity.stack.versions import installed_version

    timings = []
    clock = time.monotonic()

    def took(what: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings.append(f"{what} {now - clock:.2f} s")
        clock = now

    if installed_version("transformer_engine") is not None and torch.cuda.is_available():
        import transformer_engine.pytorch  # noqa: F401

        took("import transformer_engine")
    import thunder  # noqa: F401

    took("import thunder")
    if torch.cuda.is_available():
        torch.cuda.init()
        took("CUDA init")
    _preloaded = True
    print(f"teparity rank preload: {', '.join(timings)}", flush=True)
