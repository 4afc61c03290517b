"""torchrun mode (``torchrun --nproc-per-node=N -m pytest ... -p no:xdist``): each torchrun process is one
rank. A run of N ranks calls ``fn`` here and all-gathers every rank's result or traceback, so every
process judges the same evidence. The process-group timeout is then the only hang defence."""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable
from typing import Any

from teparity.launch.outcome import (
    Backend,
    RankFailure,
    RanksFailed,
    failed_header,
    qualified_name,
    rank_traceback,
    rerun_line,
)
from teparity.launch.rank import import_before_joining


def torchrun_world() -> tuple[int, int] | None:
    """(rank, world size) of this process when torchrun started it, else None."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return None
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def run_joined(
    fn: Callable[..., Any], *args: Any, world_size: int, backend: Backend, pg_timeout: float, label: str | None = None
) -> list[Any]:
    """``fn(rank, world_size, *args)`` in this process, as one of torchrun's ranks; results in rank order."""
    __tracebackhide__ = True
    import torch
    import torch.distributed as dist

    joined = torchrun_world()
    if joined is None or joined[1] != world_size:
        raise RuntimeError(
            f"under torchrun with WORLD_SIZE={joined and joined[1]} a run asked for {world_size} ranks "
            f"(pass --teparity-world-size {joined and joined[1]}, or leave it unset)"
        )
    rank = joined[0]
    if not dist.is_initialized():
        import_before_joining()
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=pg_timeout))
    try:
        payload: dict[str, Any] = {"ok": fn(rank, world_size, *args)}
    except Exception:
        payload = {"error": rank_traceback()}
    gathered: list[Any] = [None] * world_size
    dist.all_gather_object(gathered, payload)
    failures = [RankFailure(r, "raised", "raised", p["error"]) for r, p in enumerate(gathered) if "error" in p]
    if failures:
        what = label or qualified_name(fn)
        raise RanksFailed(
            failures, pids=[],
            header=failed_header(len(failures), world_size, what, backend),
            footer=f"{rerun_line()}\nranks of torchrun's process group",
        )
    return [p["ok"] for p in gathered]


def leave_joined_group() -> None:
    """Destroy the torchrun process group that ``run_joined`` joined (all ranks together), if it did."""
    if torchrun_world() is None or "torch.distributed" not in sys.modules:  # nothing joined one
        return
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
