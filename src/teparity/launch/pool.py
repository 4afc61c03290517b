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

import atexit
import json
import multiprocessing.connection
import os
import pickle
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teparity.launch.forkserver import (
    FORK_SERVER_VARIABLE,
    ForkedProcess,
    ForkServerClient,
    ForkServerError,
    StartedServer,
    check_standby,
    environment,
    start_server,
)
from teparity.launch.outcome import (
    FAILURE_GRACE_S,
    START_DEADLINE_S,
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
    wall_clock,
)
from teparity.launch.rank import join_group, start_rank

#: Run once in each warm rank after it joined its group (module level, so that spawn can import it).
Prologue = Callable[[], None] | None
#: Modules the fork server imports before it forks ranks (None: spawn the ranks).
ForkPreload = tuple[str, ...] | None



#: A process group: its size, backend, timeout, and the rendezvous file that forms it.
Group = tuple[int, str, float, str]


@dataclass(frozen=True)
class Running:
    """A run that ``RankPool.start`` sent: what it is, on how many ranks, its deadline and when it began."""

    label: str
    world_size: int
    timeout: float
    started: float


def _pool_rank_main(conn: Any, rank: int, workdir: str, parent_pid: int | None, prologue: Prologue) -> None:
    """Entry point of a warm rank: start as a fresh rank does, run the prologue, then run tasks until told
    to stop, joining each task's process group first where it is not the one this rank is in. A forked
    rank has no ``parent_pid``: its parent is the fork server. A standby rank of the fork server ran the
    prologue before a request took it, and fails here where what it imported then changed since."""
    start_rank(rank, workdir, parent_pid)
    try:
        if (ahead := check_standby()) is not None:
            print(f"teparity rank: {ahead}", flush=True)
        if prologue is not None:
            prologue()
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        os._exit(1)
    conn.send(("ready", None))
    joined: Group | None = None
    while True:  # until the parent kills it (RankPool.close) or goes away
        try:
            task = conn.recv()
        except EOFError:  # the parent is gone
            os._exit(0)
        number, fn, args, label, group = task
        print(f"=== teparity task {number}: {label} (from {wall_clock()})", flush=True)
        clock = time.monotonic()
        try:
            if group != joined:
                world_size, backend, pg_timeout_s, rendezvous = group
                join_group(rank, world_size, backend, Path(rendezvous), pg_timeout_s)
                joined, clock = group, time.monotonic()
            reply = ("ok", pickle.dumps(fn(rank, group[0], *args)))  # bytes: no tensor travels as a file descriptor
        except BaseException:
            reply = ("error", traceback.format_exc())
        print(task_line(label, time.monotonic() - clock), flush=True)
        conn.send(reply)
        if reply[0] == "error":
            os._exit(1)  # peers may be stuck in a collective with this rank; the parent discards the pool


class RankPool:
    """Warm ranks that serve every world size up to their number (see the module docstring): a run on N
    ranks runs on ranks 0..N-1 in an N-rank process group, formed anew where the last run's group was
    another; the pool grows where a run needs more ranks than it has."""

    def __init__(
        self, world_size: int, backend: Backend, pg_timeout: float, workdir: Path, prologue: Prologue = None,
        fork_preload: ForkPreload = None,
    ) -> None:
        #: The group a run gets when it names none: the one the pool was made for.
        self.world_size, self.backend, self.pg_timeout = world_size, backend, pg_timeout
        self.prologue = prologue
        self.forked = fork_preload is not None
        workdir.mkdir(parents=True, exist_ok=True)
        self.run_dir = Path(tempfile.mkdtemp(prefix="pool-", dir=workdir))
        self.tasks = 0
        self.connections: list[Any] = []
        self.processes: list[Any] = []
        #: How many ranks said they are ready (the others are still in their prologue).
        self.ready = 0
        #: The process group the ranks of the last run are in, and how many groups the pool formed.
        self.group: Group | None = None
        self.groups = 0
        self._server = fork_server(fork_preload, self.run_dir) if fork_preload is not None else None
        self.grow(world_size)

    def grow(self, size: int) -> None:
        """Start ranks until the pool has ``size`` (each runs the prologue; ``run`` waits for it)."""
        if self._server is None:
            import torch.multiprocessing as torch_mp

            context = torch_mp.get_context("spawn")
        try:
            for rank in range(len(self.processes), size):
                args = (rank, str(self.run_dir), None if self.forked else os.getpid(), self.prologue)
                if self._server is not None:
                    process, parent_end = self._server.start(
                        _pool_rank_main, args, prologue=None if self.prologue is None else qualified_name(self.prologue))
                else:
                    parent_end, child_end = context.Pipe()
                    process = context.Process(target=_pool_rank_main, args=(child_end, *args), name=f"teparity-warm-rank{rank}")
                    process.start()
                    child_end.close()
                self.connections.append(parent_end)
                self.processes.append(process)
        except BaseException:
            self.close()  # the ranks started so far
            raise

    @property
    def fork_server_pid(self) -> int | None:
        """The fork server's pid, for forked ranks."""
        return self._server.pid if self._server is not None else None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]

    def alive(self) -> bool:
        return all(p.is_alive() for p in self.processes)

    def run(
        self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float, label: str | None = None, *,
        world_size: int | None = None, backend: Backend | None = None, pg_timeout: float | None = None,
    ) -> list[Any]:
        """``fn(rank, world_size, *args)`` on ranks 0..world_size-1 (default: the pool's own group); results in
        rank order. On any failure the pool is closed (its ranks killed) and ``RanksFailed`` names every
        failing rank."""
        __tracebackhide__ = True
        return self.finish(self.start(fn, args, timeout, label, world_size=world_size, backend=backend, pg_timeout=pg_timeout))

    def start(
        self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float, label: str | None = None, *,
        world_size: int | None = None, backend: Backend | None = None, pg_timeout: float | None = None,
    ) -> Running:
        """Send ``fn`` to the ranks of its group and return at once (``finish`` waits for it), so that another
        pool can run something meanwhile; the harness deadline counts from now."""
        __tracebackhide__ = True
        world_size = world_size or self.world_size
        wanted = (world_size, backend or self.backend, pg_timeout or self.pg_timeout)
        if world_size > len(self.processes):
            self.grow(world_size)
        if self.ready < len(self.processes):
            self._collect("start-up", START_DEADLINE_S, expect="ready", ranks=range(self.ready, len(self.processes)))
            self.ready = len(self.processes)
        if self.group is None or self.group[:3] != wanted:
            self.groups += 1
            self.group = (*wanted, str(self.run_dir / f"rendezvous-{self.groups}"))
        self.tasks += 1
        label = label or qualified_name(fn)
        for rank in range(world_size):
            self.connections[rank].send((self.tasks, fn, args, label, self.group))
        return Running(label, world_size, timeout, time.monotonic())

    def finish(self, running: Running) -> list[Any]:
        """The results of a run that ``start`` sent, in rank order (``run``'s failures)."""
        __tracebackhide__ = True
        replies = self._collect(running.label, running.timeout, expect="ok", ranks=range(running.world_size),
                                started=running.started)
        return [pickle.loads(payload) for payload in replies]

    def _collect(self, what: str, timeout: float, *, expect: str, ranks: range, started: float | None = None) -> list[Any]:
        """One reply per rank of ``ranks`` within ``timeout`` of ``started`` (default: now), or every rank's
        failure (raised, died, or still running: stack-dumped)."""
        __tracebackhide__ = True
        replies: dict[int, Any] = {}
        failures: list[RankFailure] = []
        deadline = (time.monotonic() if started is None else started) + timeout
        failed_at: float | None = None
        waiting = set(ranks)
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
            since = "the pool started them" if expect == "ready" else "the run was sent"
            why = hang_reason(timeout, after_failure=failed_at is not None, since=since)
            dump_stacks(self.processes[rank].pid for rank in sorted(waiting))
            failures += [RankFailure(r, "hung", why, log_tail(self.run_dir, r)) for r in sorted(waiting)]
        if not failures:
            return [replies[rank] for rank in ranks]
        group = self.group or (self.world_size, self.backend, self.pg_timeout)
        self.close()
        raise RanksFailed(
            sorted(failures, key=lambda f: f.rank),
            pids=self.pids,
            header=(
                f"{len(failures)} of {len(ranks)} warm ranks failed ({what}, backend {group[1]}, harness "
                f"deadline {timeout:g} s, process-group timeout {group[2]:g} s); the pool is discarded"
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
        for process in self.processes:
            if isinstance(process, ForkedProcess):
                process.close()


#: The fork server this process started, and its connection to the one its ranks are forked by.
_started: StartedServer | None = None
_client: ForkServerClient | None = None
_adopted: ForkServerClient | None = None


def start_fork_server(fork_preload: tuple[str, ...], log_dir: Path) -> StartedServer:
    """Start the fork server of this process and of the processes it starts from now on (the pytest
    controller's, for itself and its xdist workers), which imports ``fork_preload`` and writes their times
    to ``log_dir/forkserver.log``; it returns at once (the imports run in the server). Once per process: a
    caller that knows ranks will be forked starts it early, so that the imports overlap its start-up."""
    global _started
    if _started is None:
        _started = start_server(fork_preload, log_dir)
        _started.advertise()
        atexit.register(_started.stop)
    return _started


def started_server() -> StartedServer | None:
    """The fork server this process started, if it did."""
    return _started


def adopted_server() -> ForkServerClient | None:
    """The fork server that started before this run and that this run forks from (``fork_server_for_run``)."""
    return _adopted


def fork_server_for_run(fork_preload: tuple[str, ...], log_dir: Path) -> str | None:
    """The fork server of a run, chosen in the process that starts it (the pytest controller): the one
    named in its environment where one is (a server that outlives the run, ``teparity.tools.served``) and
    fits this run (``unfit``), else one it starts now (``start_fork_server``); never the own server of a run
    that this one is nested in (a harness test's pytest run). Returns why a named server was not taken, or
    None."""
    global _client, _adopted
    named = os.environ.get(FORK_SERVER_VARIABLE)
    server = json.loads(named) if named else {}
    if not server.get("owner"):  # none, or the own server of a run this one is nested in: start this run's
        start_fork_server(fork_preload, log_dir)  # (which names itself in place of the one it inherited)
        return None
    owner = f"{server['owner']} (pid {server['pid']})"
    try:
        client = _connect(server)
    except ForkServerError as error:
        why = error.reason
    else:
        if (why := unfit(client, fork_preload)) is None:
            _client = _adopted = client
            atexit.register(client.sock.close)
            return None
        client.sock.close()
    del os.environ[FORK_SERVER_VARIABLE]
    start_fork_server(fork_preload, log_dir)
    return f"not the fork server of {owner}: {why}"


def _connect(server: dict[str, Any]) -> ForkServerClient:
    return ForkServerClient(server["address"], server["pid"], server["log"], server.get("owner"))


def fork_server(fork_preload: tuple[str, ...], log_dir: Path) -> ForkServerClient:
    """This process's connection to its fork server: the one named in its environment (``start_fork_server``
    here or in the process that started this one), else one it starts now with its log in ``log_dir``. A
    named server that cannot be reached (or failed a fork request) is replaced by one of this process's own,
    saying why on stderr; this process's own is never replaced (a failure there is the pool's to raise)."""
    global _client
    if _client is not None and not _client.broken:
        return _client
    if _client is not None:  # it failed a fork request: reach it again, or start this process's own
        _client.sock.close()
        _client = None
    if (named := os.environ.get(FORK_SERVER_VARIABLE)) is None:
        start_fork_server(fork_preload, log_dir)
        named = os.environ[FORK_SERVER_VARIABLE]
    try:
        _client = _connect(json.loads(named))
        atexit.register(_client.sock.close)  # held to the end: the server kills a departed client's ranks
    except ForkServerError as error:
        if _started is not None:
            raise
        print(f"teparity: starting this process's own fork server: {error}", file=sys.stderr, flush=True)
        del os.environ[FORK_SERVER_VARIABLE]
        return fork_server(fork_preload, log_dir)
    return _client


def unfit(server: ForkServerClient, fork_preload: tuple[str, ...]) -> str | None:
    """Why ranks this process starts now may not be forked by ``server``, or None: they may where it
    imported ``fork_preload`` in this process's environment (``PER_PROCESS_VARIABLES`` aside), so that what
    its ranks run read theirs, and none of the files it imported changed since."""
    if server.preload != fork_preload:
        return f"the fork server (pid {server.pid}) preloaded {server.preload}, not {fork_preload}"
    theirs, ours = dict(server.environment), dict(environment())
    if differ := sorted(name for name in theirs.keys() | ours.keys() if theirs.get(name) != ours.get(name)):
        return f"the environment differs from the fork server's (pid {server.pid}) in {', '.join(differ)}"
    count, named = server.changed
    if count:
        more = f" and {count - len(named)} more" if count > len(named) else ""
        return f"{count} files that the fork server (pid {server.pid}) imported changed since: {', '.join(named)}{more}"
    return None


def not_forkable(fork_preload: tuple[str, ...], log_dir: Path) -> str | None:
    """Why a pool started now may not be forked by this process's fork server, or None (``unfit``)."""
    return unfit(fork_server(fork_preload, log_dir), fork_preload)


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
                print(f"teparity: spawning warm ranks instead of forking them: {why}", file=sys.stderr, flush=True)
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
            print(f"teparity: the ranks started before the first run did not start ({type(error).__name__}); "
                  "the first run starts them", file=sys.stderr, flush=True)

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
    every pool of the call (their ranks may be mid-run) and raises the ``RanksFailed`` of the first call
    that failed."""
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
