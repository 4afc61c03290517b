"""Standby ranks: ranks a fork server that outlives its runs (``teparity.tools.served``) keeps forked ahead of
requests, each of which has run the prologue of the pools it stands in for (and a warm-up) in the server's
environment: what a rank forked at a run's request would spend its first seconds on (importing thunder, which
cannot be imported before a fork; CUDA; the first FP8 step). A fork request that names that prologue takes one
(a ready one first, else one still warming) instead of a new child; the standby then takes the client's
environment as a forked child does, and checks, before the prologue runs again (``check_standby``), that none
of the files it imported changed since. The server forks new standbys while no client has a rank running
(between the runs of a command), and stops where one failed."""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import os
import selectors
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from teparity.launch.forked import exit_child, leave_server, log, run_call
from teparity.launch.outcome import wall_clock
from teparity.launch.stamps import Stamp, changed_files, imported_files
from teparity.launch.wire import recv, send


@dataclass(frozen=True)
class Standby:
    """Ranks a fork server keeps forked ahead of requests: ``count`` of them, each having run ``prologue`` (the
    dotted name of the pools' prologue it stands in for; a request naming another gets a new child) and then
    ``warm_up`` (a dotted name, or None) in the server's environment (module docstring)."""

    count: int
    prologue: str
    warm_up: str | None = None


@dataclass
class _StandbyRank:
    """A rank forked ahead of requests: its pid, the server's end of its socket, when it was forked, and once
    it said it is ready, the files it imported beyond the server's with their stamps (None: still warming)."""

    pid: int
    sock: socket.socket
    forked: float
    stamps: dict[str, Stamp | None] | None = None


class Standbys:
    """The server's standby ranks (``Standby``; module docstring): forked ahead, taken by requests that name
    their prologue, forked anew between runs; none once one exited before a request took it."""

    def __init__(self, config: dict[str, Any] | None, selector: selectors.BaseSelector, server_files: set[str]) -> None:
        self.config, self.selector, self.server_files = config, selector, server_files
        self.ranks: dict[socket.socket, _StandbyRank] = {}
        #: Standbys forked and not taken (nor killed as stale): one that exits is a failure.
        self.unclaimed: set[int] = set()
        self.taken = 0
        self.failed: str | None = None

    def status(self) -> dict[str, Any]:
        ready = sum(rank.stamps is not None for rank in self.ranks.values())
        return {"ready": ready, "warming": len(self.ranks) - ready, "taken": self.taken, "failed": self.failed}

    def sockets(self) -> list[socket.socket]:
        return list(self.ranks)

    def fill(self, server: int, inherited: list[Any]) -> None:
        """Fork standbys up to their count (a child closes ``inherited``, the server's descriptors)."""
        while self.config and not self.failed and len(self.ranks) < self.config["count"]:
            ours, theirs = socket.socketpair()
            try:
                pid = os.fork()
            except OSError as error:
                ours.close()
                theirs.close()
                self._fail(f"forking a standby rank failed: {error}")
                return
            if pid == 0:
                standby_rank(theirs, self.config, self.server_files, server, [ours, *inherited, *self.ranks])
            theirs.close()
            self.ranks[ours] = _StandbyRank(pid, ours, time.monotonic())
            self.unclaimed.add(pid)
            self.selector.register(ours, selectors.EVENT_READ)

    def readable(self, sock: Any) -> bool:
        """Read what a standby said on ``sock`` (that it is ready); False where ``sock`` is no standby's."""
        rank = self.ranks.get(sock)
        if rank is None:
            return False
        try:
            message, _ = recv(sock)
        except (EOFError, OSError):  # it ended; its reaping says how
            self._retire(rank).close()
            return True
        rank.stamps = message["stamps"]
        log(f"standby pid {rank.pid} ready {time.monotonic() - rank.forked:.1f} s after its fork, at {wall_clock()}")
        return True

    def take(self, prologue: str | None) -> _StandbyRank | None:
        """A standby for a request whose target runs ``prologue`` first: a ready one whose imported files are
        unchanged (a stale one is killed), else the longest warming; None where none fits."""
        if not self.config or prologue != self.config["prologue"]:
            return None
        for rank in sorted(self.ranks.values(), key=lambda rank: (rank.stamps is None, rank.forked)):
            if rank.stamps is not None and (changed := changed_files(rank.stamps))[0]:
                self._kill(rank)
                log(f"standby pid {rank.pid} killed, not taken: {changed[0]} of the files it imported changed since "
                     f"({', '.join(changed[1])})")
                continue
            self._forget(rank)
            self.taken += 1
            return rank
        return None

    def reaped(self, pid: int, exitcode: int) -> None:
        """A child ended: a standby that no request took is a failure (no more are forked)."""
        if pid not in self.unclaimed:
            return
        self.unclaimed.discard(pid)
        for rank in [rank for rank in self.ranks.values() if rank.pid == pid]:
            self._retire(rank).close()
        self._fail(f"standby rank pid {pid} ended (exit code {exitcode}) before a request took it; its output is in "
                   f"the fork server's log")

    def _forget(self, rank: _StandbyRank) -> None:
        """No longer the server's to hand out or to await: taken by a request, or killed."""
        self._retire(rank)
        self.unclaimed.discard(rank.pid)

    def _kill(self, rank: _StandbyRank) -> None:
        self._forget(rank)
        rank.sock.close()
        with contextlib.suppress(ProcessLookupError):  # it ended, not yet reaped
            os.kill(rank.pid, signal.SIGKILL)

    def _retire(self, rank: _StandbyRank) -> socket.socket:
        self.selector.unregister(rank.sock)
        del self.ranks[rank.sock]
        return rank.sock

    def _fail(self, why: str) -> None:
        """No more standbys: those still waiting are killed, not handed out (they would fail the same way)."""
        if self.failed is None:
            self.failed = why
            others = list(self.ranks.values())
            for rank in others:
                self._kill(rank)
            killed = f"; {len(others)} more killed, not handed out" if others else ""
            log(f"no more standby ranks: {why}{killed}")


#: In a rank that a request took from the standby ranks: the files it imported ahead with their stamps, and
#: what it did ahead (``check_standby``).
_taken_standby: tuple[dict[str, Stamp | None], str] | None = None


def standby_rank(sock: socket.socket, config: dict[str, Any], server_files: set[str], server: int,
             inherited: list[Any]) -> NoReturn:
    """In a standby rank: leave the server behind, run the prologue and warm-up in the server's environment,
    say so with the files it imported beyond the server's, then wait until a request takes it and run that."""

    def body() -> None:
        global _taken_standby
        leave_server(server, inherited)
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stack on demand, into the server's log
        clock = time.monotonic()
        stamps: dict[str, Stamp | None] = {}
        for name in filter(None, (config["prologue"], config["warm_up"])):
            module, _, function = name.rpartition(".")
            getattr(importlib.import_module(module), function)()
            # Stamped after the step that imported them: a change during a later step is one since.
            stamps |= {path: stamp for path, stamp in imported_files().items() if path not in server_files and path not in stamps}
        ahead = f"a standby rank of the fork server (pid {server}), ready {time.monotonic() - clock:.2f} s after its fork at {wall_clock()}"
        with contextlib.suppress(OSError):  # a request took it while it warmed: the server closed its end
            send(sock, {"op": "ready", "stamps": stamps})
        try:
            message, fds = recv(sock, max_fds=1)  # what was sent before the server closed its end stays readable
        except EOFError:  # the server is gone (its death signal follows) or it killed this standby
            os._exit(0)
        sock.close()
        _taken_standby = (stamps, ahead)
        run_call(message["payload"], fds[0])

    exit_child(body)


def check_standby() -> str | None:
    """In a rank that was a standby (``Standby``): what it did before a request took it, or RuntimeError where
    a file it imported then changed since (it would run code no longer installed). None in any other process."""
    if _taken_standby is None:
        return None
    stamps, ahead = _taken_standby
    count, named = changed_files(stamps)
    if count:
        raise RuntimeError(f"this rank was {ahead}, and {count} of the files it imported then changed since "
                           f"({', '.join(named)}): it would run code no longer installed")
    return ahead
