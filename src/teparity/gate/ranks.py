"""How the gate runs a function on ranks: the launch mode (forked, warm, fresh, or the torchrun processes
themselves), the backend, and the wrapper every rank runs the function in
(``teparity.inrank.task.in_rank``: injected mutations once, a reset before each run). The launchers in
``teparity.launch`` know none of this."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

from teparity.launch.outcome import Backend

Mode = Literal["forked", "warm", "fresh"]
#: What the fork server of forked ranks imports: the module whose import is the preload.
FORK_PRELOAD = ("teparity.inrank.forkable",)


class RankRunner(Protocol):
    """``runner(fn, *args, world_size=N)``: ``fn(rank, N, *args)`` on N ranks, results in rank order."""

    def __call__(self, fn: Callable[..., Any], *args: Any, world_size: int) -> list[Any]: ...


def default_backend(world_size: int) -> Backend:
    """NCCL with one GPU per rank when there are enough GPUs, else gloo (docs/design.md, "Backend")."""
    from teparity.stack.envprobe import environment

    return "nccl" if len(environment().gpus) >= world_size else "gloo"


def rank_runner(mode: Mode, backend: Backend, timeout: float, workdir: Callable[[], Path]) -> RankRunner:
    """The session's runner: under torchrun a run of its world size joins torchrun's group; otherwise
    ``mode`` picks fresh, warm or forked ranks (warm ranks forked from a fork server that imported
    ``teparity.inrank.forkable``). One-rank runs use gloo (no collective needs a GPU per rank)."""
    from teparity.inrank.task import in_rank, preload
    from teparity.launch.fresh import run_ranks
    from teparity.launch.outcome import pg_timeout_for, qualified_name
    from teparity.launch.pool import warm_ranks
    from teparity.launch.torchrun import run_joined, torchrun_world

    def run(fn: Callable[..., Any], *args: Any, world_size: int) -> list[Any]:
        __tracebackhide__ = True
        label = qualified_name(fn)
        chosen: Backend = backend if world_size > 1 else "gloo"
        if torchrun_world() is not None and world_size > 1:
            return run_joined(in_rank, fn, *args, world_size=world_size, backend=chosen,
                              pg_timeout=pg_timeout_for(timeout, None), label=label)
        if mode in ("warm", "forked"):
            return warm_ranks(in_rank, fn, *args, world_size=world_size, backend=chosen, timeout=timeout,
                              workdir=workdir(), prologue=preload, label=label,
                              fork_preload=FORK_PRELOAD if mode == "forked" else None)
        return run_ranks(in_rank, fn, *args, world_size=world_size, backend=chosen, timeout=timeout,
                         workdir=workdir(), label=label)

    return run
