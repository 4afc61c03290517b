"""How the gate runs a function on ranks: the launch mode (forked, warm, fresh, or the torchrun processes
themselves), the backend, and the wrapper every rank runs the function in
(``teparity.inrank.task.in_rank``: injected mutations once, a reset before each run). The launchers in
``teparity.launch`` know none of this."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from teparity.gate.references import ReferenceCall, ReferenceStore
from teparity.launch.outcome import Backend
from teparity.strategies import Strategy

Mode = Literal["forked", "warm", "fresh"]
#: What the fork server of forked ranks imports: the module whose import is the preload.
FORK_PRELOAD = ("teparity.inrank.forkable",)


#: A call for ranks: the function, its arguments after ``(rank, world_size)``.
Call = tuple[Callable[..., Any], tuple[Any, ...]]


class RankRunner(Protocol):
    """``runner(fn, *args, world_size=N)``: ``fn(rank, N, *args)`` on N ranks, results in rank order;
    ``runner.side_by_side([(fn, args), ...], world_size=N)``: each call on N ranks of its own, at once where
    the launch mode allows (forked and warm ranks), results in call order."""

    def __call__(self, fn: Callable[..., Any], *args: Any, world_size: int) -> list[Any]: ...

    def side_by_side(self, calls: Sequence[Call], *, world_size: int) -> list[list[Any]]: ...

    def prestart(self, world_size: int) -> None: ...


def close_all() -> None:
    """End every pool of ranks this process started and, under torchrun, leave the process group that its
    multi-rank runs joined (all ranks together); a launcher this process never imported started nothing."""
    import sys

    if "teparity.launch.pool" in sys.modules:
        sys.modules["teparity.launch.pool"].close_pools()
    if "teparity.launch.torchrun" in sys.modules:
        sys.modules["teparity.launch.torchrun"].leave_joined_group()


def default_backend(world_size: int) -> Backend:
    """NCCL with one GPU per rank when there are enough GPUs, else gloo (docs/design.md, "Backend")."""
    from teparity.stack.envprobe import environment

    return "nccl" if len(environment().gpus) >= world_size else "gloo"


@dataclass(frozen=True)
class _Runner:
    mode: Mode
    backend: Backend
    timeout: float
    workdir: Callable[[], Path]
    #: Whether calls asked for side by side run at once (``--teparity-sides``); else one after another.
    concurrent: bool

    def __call__(self, fn: Callable[..., Any], *args: Any, world_size: int) -> list[Any]:
        __tracebackhide__ = True
        return self.side_by_side([(fn, args)], world_size=world_size)[0]

    def side_by_side(self, calls: Sequence[Call], *, world_size: int) -> list[list[Any]]:
        __tracebackhide__ = True
        from teparity.inrank.task import in_rank
        from teparity.launch.fresh import run_ranks
        from teparity.launch.outcome import pg_timeout_for, qualified_name
        from teparity.launch.pool import warm_ranks_side_by_side
        from teparity.launch.torchrun import run_joined, torchrun_world

        chosen = self._backend_for(world_size)
        if torchrun_world() is not None and world_size > 1:
            return [run_joined(in_rank, fn, *args, world_size=world_size, backend=chosen,
                               pg_timeout=pg_timeout_for(self.timeout, None), label=qualified_name(fn))
                    for fn, args in calls]
        if self.mode == "fresh":
            return [run_ranks(in_rank, fn, *args, world_size=world_size, backend=chosen, timeout=self.timeout,
                              workdir=self.workdir(), label=qualified_name(fn)) for fn, args in calls]
        batches = [list(calls)] if self.concurrent else [[call] for call in calls]
        return [result for batch in batches for result in warm_ranks_side_by_side(
            [(in_rank, (fn, *args), qualified_name(fn)) for fn, args in batch], **self._pool_settings(world_size))]

    def prestart(self, world_size: int) -> None:
        """Start the ranks of this process's first ``world_size``-rank runs now, in the background (forked and
        warm ranks; ``teparity.launch.pool.prestart``), so that their start-up and prologue (thunder's import,
        CUDA's) overlap the collection of the tests."""
        from teparity.launch.pool import prestart
        from teparity.launch.torchrun import torchrun_world

        if self.mode == "fresh" or torchrun_world() is not None:
            return
        prestart(**self._pool_settings(world_size))

    def _backend_for(self, world_size: int) -> Backend:
        """One-rank runs use gloo: no collective needs a GPU per rank."""
        return self.backend if world_size > 1 else "gloo"

    def _pool_settings(self, world_size: int) -> dict[str, Any]:
        """What a warm or forked pool is started with and found by (``teparity.launch.pool``): one place, so that
        the pool ``prestart`` starts is the one the runs then take."""
        from teparity.inrank.task import preload

        return {"world_size": world_size, "backend": self._backend_for(world_size), "timeout": self.timeout,
                "workdir": self.workdir(), "prologue": preload,
                "fork_preload": FORK_PRELOAD if self.mode == "forked" else None}


def rank_runner(mode: Mode, backend: Backend, timeout: float, workdir: Callable[[], Path], *,
                concurrent: bool = True) -> RankRunner:
    """The session's runner: under torchrun a run of its world size joins torchrun's group; otherwise
    ``mode`` picks fresh, warm or forked ranks (warm ranks forked from a fork server that imported
    ``teparity.inrank.forkable``). One-rank runs use gloo (no collective needs a GPU per rank). Calls run
    side by side go to a pool each where ``concurrent`` (warm and forked ranks), else one after another."""
    return _Runner(mode, backend, timeout, workdir, concurrent)


@dataclass(frozen=True)
class StrategyRanks:
    """The session's ranks as a spec's strategy takes them (``teparity.strategies``): ``ranks(fn, spec)`` and
    ``ranks.side_by_side([(fn, (spec, ...)), ...])`` run on the world size of the spec's strategy (``spec.parallel``:
    one rank, or the session's ``--teparity-world-size``) and skip, with the reason, where it cannot run here. Every
    multi-rank run of a tier gets its world size from here, never from the test."""

    runner: RankRunner
    #: The session's ranks (``--teparity-world-size``).
    session: int
    backend: Backend
    #: The probed ``teparity.stack.environment.Environment``: the thunder build and the GPUs a strategy needs.
    env: Any
    #: Where reference calls (``teparity.gate.references.reference``) are reused from and stored, or None: computed.
    references: ReferenceStore | None = None

    def world_size(self, strategy: Strategy) -> int:
        return strategy.world_size(self.session)

    def absent(self, strategy: Strategy) -> str | None:
        """Why ``strategy`` cannot run here (absent by design), or None."""
        return strategy.absent(self.world_size(strategy), self.env.versions.thunder, backend=self.backend,
                               gpus=len(self.env.gpus))

    def __call__(self, fn: Callable[..., Any], spec: Any, *args: Any) -> list[Any]:
        __tracebackhide__ = True
        return self.side_by_side([(fn, (spec, *args))])[0]

    def side_by_side(self, calls: Sequence[Call | ReferenceCall]) -> list[list[Any]]:
        """Each call on ranks of its own (``RankRunner.side_by_side``); a call's first argument is its spec, and the
        calls' specs name one strategy. A reference call is served from the store where its key has a record."""
        __tracebackhide__ = True
        import pytest

        strategies = {call[1][0].parallel for call in calls}
        if len(strategies) != 1:
            raise ValueError(f"calls side by side run one strategy's ranks, not {sorted(s.name for s in strategies)}")
        strategy = strategies.pop()
        if reason := self.absent(strategy):
            pytest.skip(reason)
        world_size = self.world_size(strategy)

        def compute(plain: list[Call]) -> list[list[Any]]:
            __tracebackhide__ = True
            return self.runner.side_by_side(plain, world_size=world_size)

        if self.references is None:
            return compute([(call[0], call[1]) for call in calls])
        return self.references.serve(calls, world_size, self.backend if world_size > 1 else "gloo", compute)
