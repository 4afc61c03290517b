"""One pool of warm ranks (``RankPool``): rank processes that stay up between runs, each of which ran the
caller's prologue once, then runs one function at a time, joining each run's process group; see
``teparity.launch.pool`` for why, and for this process's pools."""

from __future__ import annotations

import multiprocessing.connection
import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teparity.launch.fork_choice import fork_server
from teparity.launch.fork_client import ForkedProcess
from teparity.launch.outcome import (
    FAILURE_GRACE_S,
    START_DEADLINE_S,
    Backend,
    RankFailure,
    RanksFailed,
    dump_stacks,
    ended,
    failed_header,
    hang_reason,
    log_tail,
    qualified_name,
    rank_traceback,
    rerun_line,
    task_line,
    wall_clock,
)
from teparity.launch.rank import join_group, start_rank
from teparity.launch.standby import check_standby

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
            reply = ("error", rank_traceback())
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
            header=failed_header(len(failures), len(ranks), what, group[1], timeout, group[2]),
            footer=f"{rerun_line()}\nwarm ranks: the pool is discarded; rank logs: {self.run_dir}",
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
