"""What a spawned rank does from its first instant, before it runs anything: it dies with its parent, its
output, a crash trace and (on SIGUSR1) every thread's stack go to its log, and it joins its process group
through a rendezvous file (no ports: safe with several pytest-xdist workers at once). Each step's time
goes to the log."""

from __future__ import annotations

import ctypes
import datetime
import faulthandler
import os
import signal
import time
from pathlib import Path
from typing import Any

from teparity.launch.outcome import Backend

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int | None) -> None:
    """SIGKILL on the parent's death; ``parent_pid`` None: whichever process is the parent now (a forked
    rank's fork server, which itself exits with the process that started it)."""
    if parent_pid is None:
        parent_pid = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the prctl took effect
        os._exit(1)


def start_rank(rank: int, workdir: str, parent_pid: int | None) -> Any:
    """Evidence capture and parent-death; returns the open ``workdir/rank{rank}.log``."""
    _die_with_parent(parent_pid)
    log = open(Path(workdir) / f"rank{rank}.log", "w", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.enable(file=log, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)
    os.environ.pop("TORCHELASTIC_RUN_ID", None)  # a spawned rank is never a torchrun process
    return log


def import_before_joining() -> None:
    """Import ``torch.distributed.nn`` while no process group exists. Its functions bind ``group=group.WORLD``
    as a default argument at import, so an import after ``init_process_group`` (thunder imports it, in a
    rank's preload) pins that group for the life of the process: ``destroy_process_group`` then leaves its
    gloo threads running, and one that frees a finished collective's tensors while the interpreter shuts
    down aborts the process ("terminate called without an active exception"; about one exit in 15 under
    torchrun on the CPU)."""
    import torch.distributed.nn  # noqa: F401


def join_group(rank: int, world_size: int, backend: Backend, rendezvous: Path, pg_timeout_s: float) -> None:
    """Import torch and join a process group through the file ``rendezvous`` (NCCL: GPU ``rank``), leaving
    the group this process was in first (a warm rank regrouped for another world size), logging the time of
    each step."""
    clock = time.monotonic()
    import torch
    import torch.distributed as dist

    import_before_joining()
    imported = time.monotonic()
    if dist.is_initialized():
        dist.destroy_process_group()
    if backend == "nccl":
        torch.cuda.set_device(rank)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size))
    dist.init_process_group(
        backend,
        init_method=f"file://{rendezvous}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=pg_timeout_s),
    )
    joined = time.monotonic()
    print(f"teparity rank {rank} start-up: import torch {imported - clock:.2f} s, {backend} process group {joined - imported:.2f} s", flush=True)
