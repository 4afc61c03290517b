"""Warm ranks: a pool of rank processes that stay up between runs, so a side costs its work, not start-up.

A fresh rank spends most of its life importing torch, TE and thunder and joining a process group (about
20 s a side on an H200, for under a second of GPU work). A ``RankPool`` starts ``world_size`` ranks once,
joins them into one process group, runs the caller's ``prologue`` once in each (the gate's imports TE and
thunder: ``teparity.inrank.task.preload``) and then one function at a time on all of them; what couples
two runs in one process is the function's to reset (the gate's is ``teparity.inrank.task.in_rank``).
The guarantees of fresh ranks hold: a rank that raises, dies or hangs fails the run with its traceback,
exit status or stack (faulthandler, on SIGUSR1 at the deadline), and every rank is killed; a pool that
saw any failure is discarded, so the next run starts fresh ranks. Ranks die with their parent.

Forked ranks (``fork_preload``): the ranks are forked by this process's fork server (multiprocessing's
``forkserver``, itself a fresh process) after it imported the ``fork_preload`` modules once, instead of
each being spawned and importing them itself. A forked rank takes this process's environment at its
start; what the fork server imported read theirs when the first forked pool started it, so a pool whose
environment differs from that one is spawned instead. The fork server (``start_fork_server``, or the
first forked pool) writes its import times to ``forkserver.log``, and it exits with this process.

``warm_ranks(fn, *args, ...)`` is ``run_ranks`` over the pool kept for (world size, backend, process-group
timeout, prologue, start method, the environment the ranks inherit) in this process; ``close_pools()``
ends them all.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teparity.launch.outcome import (
    FAILURE_GRACE_S,
    Backend,
    RankFailure,
    RanksFailed,
    dump_stacks,
    ended,
    hang_reason,
    log_tail,
    pg_timeout_for,
    qualified_name,
    rerun_line,
    task_line,
)
from teparity.launch.rank import join_group, start_rank

#: Run once in each warm rank after it joined its group (module level, so that spawn can import it).
Prologue = Callable[[], None] | None
#: Modules the fork server imports before it forks ranks (None: spawn the ranks).
ForkPreload = tuple[str, ...] | None
#: The fork server's log of its imports (set in its environment when this process starts it).
FORK_SERVER_LOG_VARIABLE = "TEPARITY_FORK_SERVER_LOG"

#: How long the ranks of a new pool may take to start and join their group before it counts as hung.
START_DEADLINE_S = 300.0


def _pool_rank_main(
    rank: int, world_size: int, backend: Backend, workdir: str, pg_timeout_s: float, parent_pid: int | None,
    prologue: Prologue, conn: Any, environ: dict[str, str] | None = None,
) -> None:
    """Entry point of a warm rank: start as a fresh rank does, run the prologue, then run tasks until told
    to stop. A forked rank (no ``parent_pid``: its parent is the fork server) first takes ``environ``."""
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
        _release_fork_server()
    start_rank(rank, world_size, workdir, parent_pid)
    try:
        join_group(rank, world_size, backend, workdir, pg_timeout_s)
        if prologue is not None:
            prologue()
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        os._exit(1)
    conn.send(("ready", None))
    while True:  # until the parent kills it (RankPool.close) or goes away
        try:
            task = conn.recv()
        except EOFError:  # the parent is gone
            os._exit(0)
        number, fn, args, label = task
        print(f"=== teparity task {number}: {label}", flush=True)
        clock = time.monotonic()
        try:
            reply = ("ok", pickle.dumps(fn(rank, world_size, *args)))  # bytes: no tensor travels as a file descriptor
        except BaseException:
            reply = ("error", traceback.format_exc())
        print(task_line(label, time.monotonic() - clock), flush=True)
        conn.send(reply)
        if reply[0] == "error":
            os._exit(1)  # peers may be stuck in a collective with this rank; the parent discards the pool


def _release_fork_server() -> None:
    """Close this forked rank's copy of the pipe by which the fork server learns that its parent died
    (multiprocessing hands every child the write end): held open here, it would keep the fork server,
    and so this rank, alive after a killed parent."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    if server._forkserver_alive_fd is not None:
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None


class RankPool:
    """``world_size`` warm ranks in one process group (see the module docstring)."""

    def __init__(
        self, world_size: int, backend: Backend, pg_timeout: float, workdir: Path, prologue: Prologue = None,
        fork_preload: ForkPreload = None,
    ) -> None:
        self.world_size, self.backend, self.pg_timeout = world_size, backend, pg_timeout
        self.forked = fork_preload is not None
        workdir.mkdir(parents=True, exist_ok=True)
        self.run_dir = Path(tempfile.mkdtemp(prefix="pool-", dir=workdir))
        self.tasks = 0
        context = _context(fork_preload, self.run_dir)
        self.connections = []
        self.processes = []
        for rank in range(world_size):
            parent_end, child_end = context.Pipe()
            process = context.Process(
                target=_pool_rank_main,
                args=(rank, world_size, backend, str(self.run_dir), pg_timeout, None if self.forked else os.getpid(),
                      prologue, child_end, dict(os.environ) if self.forked else None),
                name=f"teparity-{'forked' if self.forked else 'warm'}-rank{rank}",
            )
            process.start()
            child_end.close()
            self.connections.append(parent_end)
            self.processes.append(process)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]

    def alive(self) -> bool:
        return all(p.is_alive() for p in self.processes)

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float, label: str | None = None) -> list[Any]:
        """``fn(rank, world_size, *args)`` on every rank; results in rank order. On any failure the pool
        is closed (its ranks killed) and ``RanksFailed`` names every failing rank."""
        __tracebackhide__ = True
        if self.tasks == 0:
            self._collect("start-up", START_DEADLINE_S, expect="ready")
        self.tasks += 1
        label = label or qualified_name(fn)
        for connection in self.connections:
            connection.send((self.tasks, fn, args, label))
        return [pickle.loads(payload) for payload in self._collect(label, timeout, expect="ok")]

    def _collect(self, what: str, timeout: float, *, expect: str) -> list[Any]:
        """One reply per rank, or every rank's failure (raised, died, or still running: stack-dumped)."""
        __tracebackhide__ = True
        replies: dict[int, Any] = {}
        failures: list[RankFailure] = []
        deadline = time.monotonic() + timeout
        failed_at: float | None = None
        waiting = set(range(self.world_size))
        while waiting and time.monotonic() < deadline:
            watched = {self.connections[r]: r for r in waiting} | {self.processes[r].sentinel: r for r in waiting}
            for ready in multiprocessing.connection.wait(list(watched), timeout=min(0.5, deadline - time.monotonic())):
                rank = watched[ready]
                if rank not in waiting:
                    continue
                waiting.discard(rank)
                failure = self._reply(rank, replies, expect)
                if failure is not None:
                    failures.append(failure)
                    if failed_at is None:
                        failed_at = time.monotonic()
                        deadline = min(deadline, failed_at + FAILURE_GRACE_S)
        if waiting:
            why = hang_reason(timeout, after_failure=failed_at is not None)
            dump_stacks(self.processes[rank].pid for rank in sorted(waiting))
            failures += [RankFailure(r, "hung", why, log_tail(self.run_dir, r)) for r in sorted(waiting)]
        if not failures:
            return [replies[rank] for rank in range(self.world_size)]
        self.close()
        raise RanksFailed(
            sorted(failures, key=lambda f: f.rank),
            pids=self.pids,
            header=(
                f"{len(failures)} of {self.world_size} warm ranks failed ({what}, backend {self.backend}, harness "
                f"deadline {timeout:g} s, process-group timeout {self.pg_timeout:g} s); the pool is discarded"
            ),
            footer=f"{rerun_line()}\nrank logs: {self.run_dir}",
        )

    def _reply(self, rank: int, replies: dict[int, Any], expect: str) -> RankFailure | None:
        connection, process = self.connections[rank], self.processes[rank]
        if connection.poll():
            try:
                kind, payload = connection.recv()
            except (EOFError, OSError):
                kind, payload = "died", None
            if kind == expect:
                replies[rank] = payload
                return None
            if kind == "error":
                return RankFailure(rank, "raised", "raised", payload)
        process.join(timeout=5)
        return ended(rank, process.exitcode, self.run_dir)

    def close(self) -> None:
        """Kill every rank and reap it: an idle warm rank holds nothing worth a graceful exit, and a busy
        one belongs to a failed run."""
        for process in self.processes:
            if process.is_alive():
                process.kill()
        for process in self.processes:
            process.join(timeout=10)
        for connection in self.connections:
            connection.close()


def start_fork_server(fork_preload: tuple[str, ...], log_dir: Path) -> None:
    """Start this process's fork server, which imports ``fork_preload`` and writes their times to
    ``log_dir/forkserver.log``; it returns at once (the imports run in the server). Once per process: a
    caller that knows it will fork ranks starts it early, so that the imports overlap its other start-up."""
    import multiprocessing.forkserver

    global _fork_server_environment
    if _fork_server_environment is not None:
        return
    _fork_server_environment = _inherited()
    multiprocessing.forkserver.set_forkserver_preload(list(fork_preload))
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ[FORK_SERVER_LOG_VARIABLE] = str(log_dir / "forkserver.log")
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        del os.environ[FORK_SERVER_LOG_VARIABLE]


def _context(fork_preload: ForkPreload, run_dir: Path) -> Any:
    """The spawn context, or the forkserver context (its server started here unless it runs already)."""
    import torch.multiprocessing as torch_mp

    if fork_preload is None:
        return torch_mp.get_context("spawn")
    start_fork_server(fork_preload, run_dir)
    return torch_mp.get_context("forkserver")


_POOLS: dict[tuple[Any, ...], RankPool] = {}
#: The environment this process's fork server started with (what its preloaded modules read).
_fork_server_environment: tuple[tuple[str, str], ...] | None = None


#: Environment variables that change while one pool serves (pytest sets it per test phase).
_VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})


def _inherited() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k not in _VOLATILE))


def _key(world_size: int, backend: Backend, pg_timeout: float, prologue: Prologue, fork_preload: ForkPreload) -> tuple[Any, ...]:
    """What a pool's ranks fixed at their start: their group, their prologue, how they started, the
    environment they inherited."""
    return world_size, backend, pg_timeout, prologue, fork_preload, _inherited()


def warm_ranks(
    fn: Callable[..., Any],
    *args: Any,
    world_size: int,
    backend: Backend,
    timeout: float,
    workdir: Path,
    pg_timeout: float | None = None,
    prologue: Prologue = None,
    fork_preload: ForkPreload = None,
    label: str | None = None,
) -> list[Any]:
    """``run_ranks`` on this process's warm pool for these settings (started on first use; forked from the
    fork server when ``fork_preload`` names its imports and the environment is the one it started with)."""
    __tracebackhide__ = True
    pg_timeout = pg_timeout_for(timeout, pg_timeout)
    if fork_preload is not None and _fork_server_environment not in (None, _inherited()):
        fork_preload = None  # what the fork server imported read another environment: spawn these ranks
    key = _key(world_size, backend, pg_timeout, prologue, fork_preload)
    pool = _POOLS.get(key)
    if pool is None or not pool.alive():
        if pool is not None:
            pool.close()
        pool = _POOLS[key] = RankPool(world_size, backend, pg_timeout, workdir, prologue, fork_preload)
    try:
        return pool.run(fn, args, timeout, label)
    except BaseException:
        _POOLS.pop(key, None)
        pool.close()
        raise


def close_pools() -> None:
    """End every warm pool of this process."""
    while _POOLS:
        _POOLS.popitem()[1].close()
