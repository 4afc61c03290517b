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
#: What ``preload`` took, for the log of a standby rank that a run took after its preload.
_preload_timings: list[str] = []


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
        from teparity.mutations import catalog as mutations

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
        from teparity.stack.te_api import fp8_global_state_manager

        fp8_global_state_manager().reset()
    if "torch._dynamo" in sys.modules:  # nothing compiled before dynamo was imported
        torch._dynamo.reset()
    if "torch.distributed.tensor" in sys.modules:
        clear_dtensor_caches()
    torch.manual_seed(0)
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def clear_dtensor_caches() -> None:
    """Empty DTensor's sharding-propagation and redistribution caches. They key on specs whose mesh equality ignores
    the mesh's process group, so after a warm rank is regrouped (``destroy_process_group``) a cached output spec
    names a destroyed group: "Could not resolve the process group registered under the name N" in FSDP2's
    ``full_tensor`` (seen once in 16 served runs on an H200; ``harness/test_dtensor_caches.py`` reproduces it on
    the CPU)."""
    from torch.distributed.tensor import _redistribute, debug

    clears = (getattr(debug, "_clear_sharding_prop_cache", None),
              getattr(_redistribute, "clear_redistribute_planner_cache", None),
              getattr(getattr(_redistribute, "_gen_transform_infos", None), "cache_clear", None))
    for clear in clears:
        if clear is not None:
            clear()


def preload() -> None:
    """Import TE (where it can run) and thunder and initialise CUDA, logging the time of each: what every
    rank pays once (a warm rank before its first run, a fresh rank before its only one; a standby rank of the
    fork server before a run takes it, which then logs what it did ahead)."""
    global _preloaded
    if _preloaded:
        print(f"teparity rank preload, done before this run: {', '.join(_preload_timings)}", flush=True)
        return
    import torch

    from teparity.stack.versions import installed_version

    clock = time.monotonic()

    def took(what: str) -> None:
        nonlocal clock
        now = time.monotonic()
        _preload_timings.append(f"{what} {now - clock:.2f} s")
        clock = now

    if installed_version("transformer_engine") is not None and torch.cuda.is_available():
        import transformer_engine.pytorch  # noqa: F401

        took("import transformer_engine")
    import thunder  # noqa: F401

    took("import thunder")
    if torch.cuda.is_available():
        torch.cuda.init()
        took("CUDA init")
        bind_autograd_threads()
        took("a backward on every GPU")
    _preloaded = True
    print(f"teparity rank preload: {', '.join(_preload_timings)}", flush=True)


def bind_autograd_threads() -> None:
    """One backward on every visible GPU, so that autograd's device threads hold a CUDA context before any side runs.
    TE before 2.7 launches its runtime-compiled kernels (the cast-transpose of aligned shapes) with ``cuLaunchKernel``
    and makes a context current only where it compiles one (common/util/rtc.h; TE PR #1952 fixed it in 2.7): in a
    process whose first backward is TE's, a kernel its forward compiled fails on the autograd thread with
    "invalid device context" (seen: TE 1.8.0, the eager llama block, E4M3 backward, in a newly forked rank)."""
    import torch

    for device in range(torch.cuda.device_count()):
        weight = torch.zeros(1, device=f"cuda:{device}", requires_grad=True)
        (weight * 1).sum().backward()
    torch.cuda.synchronize()


def warm_up() -> None:
    """A standby rank's warm-up after ``preload``, before a run takes it: TE's first FP8 steps (a process's
    first FP8 step with TE's Python scale update compiles it, about 2.5 s; the fused update's first run and
    cuBLAS's first FP8 GEMM), so that the first side it runs costs what later ones do; then the reset a run
    starts with. Only where TE runs on one FP8 GPU: TE keeps its cuBLAS workspace on the device of its first
    GEMM, and with several GPUs a rank runs on the GPU of its rank."""
    import torch

    if "transformer_engine.pytorch" not in sys.modules or not torch.cuda.is_available() or torch.cuda.device_count() != 1:
        return
    if torch.cuda.get_device_capability() < (8, 9):
        return
    import transformer_engine.pytorch as te

    from teparity.inrank.program import te_scale_update
    from teparity.stack import recipes
    from teparity.stack.te_api import te_autocast

    clock = time.monotonic()
    layer = te.Linear(32, 32, device="cuda")
    x = torch.randn(16, 32, device="cuda", requires_grad=True)
    for update in ("python", "fused"):
        with te_scale_update(update):
            with te_autocast(recipes.build("delayed")):
                y = layer(x)
            y.float().sum().backward()
    torch.cuda.synchronize()
    del layer, x, y
    reset_between_runs()
    print(f"teparity rank warm-up: TE's first FP8 steps {time.monotonic() - clock:.2f} s", flush=True)
