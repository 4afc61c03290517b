"""Warm ranks: a pool of rank processes that stay up between runs, so a side costs its work, not start-up.

A fresh rank spends most of its life importing torch, TE and thunder and joining a process group (about
20 s a side on an H200, for under a second of GPU work); a warm rank's first run also pays for what
torch.compile, TE and thunder do once per process (4-7 s of its first eager side and 2-11 s of its first
thunder side under ``-n 12`` on an H200). A ``RankPool`` starts its ranks once, runs the caller's
``prologue`` once in each (the gate's imports TE and thunder: ``teparity.inrank.task.preload``) and then
one function at a time; what couples two runs in one process is the function's to reset (the gate's is
``teparity.inrank.task.in_rank``). One pool serves every world size: a run on N ranks runs on ranks
0..N-1, which join an N-rank process group (gloo or NCCL, the run's) where the last run's group was
another, and the pool starts more ranks where it has fewer than N. So an xdist worker that runs one-rank
and two-rank tests pays each process's first-run costs once, not once per world size.

The guarantees of fresh ranks hold: a rank that raises, dies or hangs fails the run with its traceback,
exit status or stack (faulthandler, on SIGUSR1 at the deadline), and every rank is killed; a pool that
saw any failure is discarded, so the next run starts fresh ranks. Ranks die with their parent.

Forked ranks (``fork_preload``): the ranks are forked by the run's one fork server
(``teparity.launch.forkserver``: the pytest controller starts it and names it to the xdist workers; a process
that finds none named starts its own) after it imported the ``fork_preload`` modules once, instead of each
being spawned and importing them itself. A forked rank takes this process's environment, path and working
directory at its start; what the fork server imported read the server's environment, so a pool whose
environment differs from that one is spawned instead. The fork server writes its import times to
``forkserver.log``; it dies with the process that started it, and kills a client's ranks when that client
goes away.

``warm_ranks(fn, *args, ...)`` is ``run_ranks`` over the pool kept for (prologue, start method, the
environment the ranks inherit) in this process; ``warm_ranks_side_by_side(calls, ...)`` runs each call on
a pool of its own lane (lane 0 is ``warm_ranks``'s), all sent before any is waited for (``RankPool.start``,
``finish``); ``close_pools()`` ends them all.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from teparity.launch.fork_choice import not_forkable
from teparity.launch.fork_client import environment
from teparity.launch.outcome import Backend, pg_timeout_for
from teparity.launch.rank_pool import ForkPreload, Prologue, RankPool

_POOLS: dict[tuple[Any, ...], RankPool] = {}
#: Held while a pool is looked up or started: ``prestart`` starts one from a thread of its own.
_POOLS_LOCK = threading.RLock()
_prestarting: threading.Thread | None = None
_spawned_because: set[str] = set()


def _key(prologue: Prologue, fork_preload: ForkPreload, lane: int) -> tuple[Any, ...]:
    """What a pool's ranks fixed at their start: their prologue, how they started, the environment they
    inherited (their process group is each run's own); and its lane, where runs go side by side."""
    return prologue, fork_preload, environment(), lane


def _pool(lane: int, world_size: int, backend: Backend, pg_timeout: float, workdir: Path, prologue: Prologue,
          fork_preload: ForkPreload) -> tuple[tuple[Any, ...], RankPool]:
    """The live pool of this lane and these settings, started where there is none."""
    with _POOLS_LOCK:
        if fork_preload is not None and (why := not_forkable(fork_preload, workdir)):
            if why not in _spawned_because:  # once per reason: stderr, shown with a failing test's output
                _spawned_because.add(why)
                sys.stderr.write(f"teparity: spawning warm ranks instead of forking them: {why}\n")  # one write
                sys.stderr.flush()
            fork_preload = None  # what the fork server imported read another environment: spawn these ranks
        key = _key(prologue, fork_preload, lane)
        pool = _POOLS.get(key)
        if pool is None or not pool.alive():
            if pool is not None:
                pool.close()
            pool = _POOLS[key] = RankPool(world_size, backend, pg_timeout, workdir, prologue, fork_preload)
        return key, pool


def prestart(*, world_size: int, backend: Backend, timeout: float, workdir: Path, prologue: Prologue = None,
             fork_preload: ForkPreload = None) -> None:
    """Start the pool that ``warm_ranks`` with these settings will run on, from a thread, and return at
    once: its ranks' start-up and prologue then overlap what this process does before its first run (an
    xdist worker's collection), and the thread may wait for the fork server's imports meanwhile. A pool that
    fails to start here is left to the first run, which starts it again and reports the failure."""
    global _prestarting

    def start() -> None:
        try:
            _pool(0, world_size, backend, pg_timeout_for(timeout, None), workdir, prologue, fork_preload)
        except Exception as error:  # the first run meets it again, with its evidence
            # One write, its newline included: print's two would let the main thread's line land between them.
            said = f"the ranks started before the first run did not start ({type(error).__name__}); the first run starts them"
            sys.stderr.write(f"teparity: {said}\n")
            sys.stderr.flush()

    _prestarting = threading.Thread(target=start, name="teparity-prestart", daemon=True)
    _prestarting.start()


def warm_ranks(fn: Callable[..., Any], *args: Any, label: str | None = None, **settings: Any) -> list[Any]:
    """``run_ranks`` on this process's warm pool for these ``settings`` (``warm_ranks_side_by_side``'s: started
    on first use, grown where a run needs more ranks; forked from the fork server when ``fork_preload`` names
    its imports and the environment is the one it started with)."""
    __tracebackhide__ = True
    return warm_ranks_side_by_side([(fn, args, label)], **settings)[0]


def warm_ranks_side_by_side(
    calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...], str | None]],
    *,
    world_size: int,
    backend: Backend,
    timeout: float,
    workdir: Path,
    pg_timeout: float | None = None,
    prologue: Prologue = None,
    fork_preload: ForkPreload = None,
) -> list[list[Any]]:
    """Each ``(fn, args, label)`` of ``calls`` on a pool of its own (lane ``i`` for the i-th), all at once:
    the two sides of a pair cost the longer one, not their sum. Results in call order; any failure closes
    every pool of the call (their ranks may be mid-run) and raises the ``RanksFailed`` of the earliest
    call that failed."""
    __tracebackhide__ = True
    pg_timeout = pg_timeout_for(timeout, pg_timeout)
    taken: list[tuple[tuple[Any, ...], RankPool]] = []
    try:
        running = []
        for lane, (fn, args, label) in enumerate(calls):
            taken.append(_pool(lane, world_size, backend, pg_timeout, workdir, prologue, fork_preload))
            running.append(taken[-1][1].start(fn, args, timeout, label, world_size=world_size, backend=backend,
                                              pg_timeout=pg_timeout))
        return [pool.finish(run) for (_key, pool), run in zip(taken, running)]
    except BaseException:
        for key, pool in taken:
            _POOLS.pop(key, None)
            pool.close()
        raise


def close_pools() -> None:
    """End every warm pool of this process (after a pool that ``prestart`` is starting)."""
    if _prestarting is not None:
        _prestarting.join()
    while _POOLS:
        _POOLS.popitem()[1].close()
