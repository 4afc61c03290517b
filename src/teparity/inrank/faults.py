"""Rank functions that misbehave on purpose: the harness tests use them to show that ``run_ranks`` and the
warm pool turn every way a rank can go wrong into a prompt failure with evidence (they live here so spawn
can import them); and ``still_running``, to show that no rank outlives its run.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path


def still_running(pids: Iterable[int]) -> list[int]:
    """The processes among ``pids`` that are alive and not zombies (dead children not yet reaped)."""

    def running(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state != "Z"

    return [pid for pid in pids if running(pid)]


def still_running_after(pids: Iterable[int], seconds: float) -> list[int]:
    """``still_running`` once they are all gone, or once ``seconds`` have passed (a killed process's
    children take a moment to follow it)."""
    pids = list(pids)
    deadline = time.monotonic() + seconds
    while (alive := still_running(pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


FAULTY_RANK = -1  # the last rank misbehaves: no assumption of ranks 0 and 1


def _faulty(rank: int, world_size: int) -> bool:
    return rank == world_size + FAULTY_RANK


def sum_of_ranks(rank: int, world_size: int) -> tuple[int, int, int]:
    """A healthy collective: every rank returns (rank, world_size, sum of all ranks)."""
    import torch
    import torch.distributed as dist

    total = torch.tensor([rank])
    dist.all_reduce(total)
    return rank, world_size, int(total.item())


def raise_on_last_rank(rank: int, world_size: int, message: str) -> None:
    """The last rank raises; the others wait for it in a barrier."""
    import torch.distributed as dist

    if _faulty(rank, world_size):
        raise ValueError(message)
    dist.barrier()


def raise_deep_on_every_rank(rank: int, world_size: int, depth: int, message: str) -> None:
    """Every rank raises ``RuntimeError(f"rank {rank}: {message}")`` from ``depth`` frames down: a traceback longer
    than a report keeps (what a collective's timeout under a deep model looks like)."""
    _deeper(depth, f"rank {rank}: {message}")


def _deeper(depth: int, message: str) -> None:
    if depth > 0:
        _deeper_still(depth - 1, message)  # frames alternate: Python folds a run of identical ones into one line
    raise RuntimeError(message)


def _deeper_still(depth: int, message: str) -> None:
    _deeper(depth, message)


def exit_on_last_rank(rank: int, world_size: int, code: int) -> None:
    """The last rank calls ``os._exit(code)`` mid-run, as a native crash or a stray exit would."""
    import torch.distributed as dist

    if _faulty(rank, world_size):
        os._exit(code)
    dist.barrier()


def kill_last_rank(rank: int, world_size: int) -> None:
    """The last rank dies from SIGKILL (the OOM killer's signal)."""
    import torch.distributed as dist

    if _faulty(rank, world_size):
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()


def skip_collective_on_last_rank(rank: int, world_size: int) -> None:
    """The classic hang: the last rank skips an all-reduce and waits elsewhere while the others block in it."""
    import torch
    import torch.distributed as dist

    if _faulty(rank, world_size):
        waiting_for_a_collective_that_others_skipped()
    else:
        dist.all_reduce(torch.ones(1))


def waiting_for_a_collective_that_others_skipped() -> None:
    while True:  # stands in for the rank's next step, which never meets the others
        time.sleep(0.1)


def span_of_a_sleep(rank: int, world_size: int, seconds: float) -> tuple[float, float]:
    """Sleep, and say when (``time.monotonic``, one clock for every process of the host): tells runs that
    overlapped from runs one after the other."""
    start = time.monotonic()
    time.sleep(seconds)
    return start, time.monotonic()


def pid_of_rank(rank: int, world_size: int) -> int:
    """The process id of the rank: tells a joined torchrun rank from a spawned one."""
    return os.getpid()


def parent_of_rank(rank: int, world_size: int) -> int:
    """The process id of the rank's parent: tells which fork server forked it."""
    return os.getppid()


def environment_variable(rank: int, world_size: int, name: str) -> str | None:
    """The rank's value of an environment variable: what it inherited at its start."""
    return os.environ.get(name)


def import_in_order(rank: int, world_size: int, names: list[str]) -> dict[str, str]:
    """Import ``names`` in this order, as a user's code might: each name's outcome ("ok" or the error), and
    whether ``matplotlib.ft2font`` had been imported by then (``ft2font loaded``)."""
    import importlib
    import sys

    outcome = {"ft2font loaded": str("matplotlib.ft2font" in sys.modules)}
    for name in names:
        try:
            importlib.import_module(name)
            outcome[name] = "ok"
        except Exception as error:
            outcome[name] = f"{type(error).__name__}: {error}"
    return outcome
