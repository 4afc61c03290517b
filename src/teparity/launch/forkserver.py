"""One fork server for a whole pytest run: a process that imports torch and TE once and forks every forked
rank of the run, for the controller and all xdist workers alike.

Why our own and not multiprocessing's ``forkserver``: that one is private to the process that started it
(its address, authkey and liveness pipe live in module state whose shape differs between Python 3.10 and
3.13), so under ``-n 12`` each worker started its own and 12 servers imported torch and TE at once. This
one speaks over a Unix socket with public APIs only (``socket.send_fds``, ``os.fork``), so any process of
the run can reach it through ``FORK_SERVER_VARIABLE``.

Lifetime: the process that starts the server (``start_server``; the pytest controller, a lone process, or a
command that runs pytest several times: ``teparity.tools.served``) owns it. The server dies with its owner
(``PR_SET_PDEATHSIG``, so a SIGKILLed owner takes it along) and every rank it forked dies with the server
(``teparity.launch.rank.start_rank``). A client that goes away
(its socket closes: an xdist worker that exits or crashes) has its ranks SIGKILLed by the server, which
keeps serving the others. Only processes of the server's own user may connect (``SO_PEERCRED``, and the
socket sits in a private directory).

Protocol: a client sends ``hello`` and learns the server's pid, preload and environment (a rank forked
from it runs what the server imported, which read that environment: ``teparity.launch.pool`` forks a pool
only where its own environment is the same), and which of the files it imported changed since (a server
that outlives a run would otherwise fork ranks that run code no longer installed). ``fork`` carries the
client's environment, ``sys.path``, working directory and a pickled ``target(connection, *args)``, with two
file descriptors: the rank's end
of its task pipe and the write end of a status pipe, on which the server writes the child's pid at once
and its exit code (``Process.exitcode``'s convention) when it reaps it. The child unpickles the call only
after it took the client's environment, so the server imports nothing but its preload.

Standby ranks (``Standby``, a server that outlives its runs: ``teparity.tools.served``): the server keeps
ranks forked ahead of requests, each of which has run the prologue of the pools it stands in for (and a
warm-up) in the server's environment: what a rank forked at a run's request would spend its first seconds
on (importing thunder, which cannot be imported before a fork; CUDA; the first FP8 step). A ``fork`` that
names that prologue takes one (a ready one first, else one still warming) instead of a new child; the
standby then takes the client's environment as a forked child does, and checks, before the prologue runs
again (``check_standby``), that none of the files it imported changed since. The server forks new
standbys while no client has a rank running (between the runs of a command), and stops where one failed.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib
import json
import os
import pickle
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NoReturn

from teparity.launch.outcome import wall_clock

#: Where the fork server of this run listens, set by its owner for the processes it starts (the xdist
#: workers): JSON ``{"address": ..., "pid": ...}``.
FORK_SERVER_VARIABLE = "TEPARITY_FORK_SERVER"
#: The fork server's log of its imports, set while it imports its preload (``teparity.inrank.forkable``).
FORK_SERVER_LOG_VARIABLE = "TEPARITY_FORK_SERVER_LOG"
#: Set per process by pytest and xdist (an xdist 3.8 worker starts with COLUMNS=80 and LINES=24, which its
#: controller lacks) and by shells (a shell that ``python -m teparity serve`` starts sets SHLVL and PS1 anew),
#: read by none of the preloaded imports: a rank takes its client's values at its start, so they may differ
#: from the server's.
PER_PROCESS_VARIABLES = frozenset({
    "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_VERSION", "COLUMNS", "LINES", FORK_SERVER_VARIABLE,
    "TEPARITY_PROBE_RUN",  # teparity.stack.envprobe.RUN_VARIABLE: each run's own
    "SHLVL", "PS1", "PS2", "PS4", "PROMPT_COMMAND", "_", "PWD", "OLDPWD",
})
#: How many changed files a hello names (it counts them all).
_CHANGED_NAMED = 5
#: How long a client waits for the server to listen, and then to finish its imports and answer.
CONNECT_DEADLINE_S = 300.0
_SOCKET_NAME = "forkserver.sock"
#: ``sockaddr_un`` holds 108 bytes with its terminating NUL.
_MAX_SOCKET_PATH = 100
_PR_SET_PDEATHSIG = 1
_STATUS = struct.Struct("!q")
_LENGTH = struct.Struct("!I")


def environment() -> tuple[tuple[str, str], ...]:
    """This process's environment as the preloaded imports read it (``PER_PROCESS_VARIABLES`` left out)."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k not in PER_PROCESS_VARIABLES))


class ForkServerError(RuntimeError):
    """The fork server cannot be started or reached, or it failed to fork; the message has its evidence (the
    tail of the server's log), ``reason`` the line before it (what a header can quote)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


# -- framing ---------------------------------------------------------------------------------------


def _send(sock: socket.socket, message: Any, fds: list[int] | None = None) -> None:
    data = pickle.dumps(message)
    frame = _LENGTH.pack(len(data)) + data
    sent = socket.send_fds(sock, [frame], fds) if fds else 0
    if sent < len(frame):  # a send of nothing to a peer that read it all and closed its end raises EPIPE
        sock.sendall(frame[sent:])


def _recv_exactly(sock: socket.socket, size: int, start: bytes = b"") -> bytes:
    data = bytearray(start)
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the peer closed the socket")
        data += chunk
    return bytes(data)


def _recv(sock: socket.socket, max_fds: int = 0) -> tuple[Any, list[int]]:
    fds: list[int] = []
    if max_fds:
        head, fds, _flags, _address = socket.recv_fds(sock, _LENGTH.size, max_fds)
        if not head:
            raise EOFError("the peer closed the socket")
    else:
        head = b""
    (length,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size, head))
    return pickle.loads(_recv_exactly(sock, length)), fds


# -- the owner's side ------------------------------------------------------------------------------


@dataclass
class StartedServer:
    """A fork server this process started (and owns); ``address`` is what clients connect to."""

    process: subprocess.Popen[bytes]
    address: str
    log: Path

    def name(self, owner: str | None = None) -> str:
        """The value of ``FORK_SERVER_VARIABLE`` that names this server to a client: where it listens, its
        pid and log, and ``owner``, the command that shares it with the pytest runs it starts (the header of
        such a run names it); None: a run's own, which the run's workers fork from and a pytest run nested in
        it does not."""
        return json.dumps({"address": self.address, "pid": self.process.pid, "log": str(self.log), "owner": owner})

    def advertise(self) -> None:
        """Name this server in this process's environment, so that the processes it starts from now on
        (the xdist workers) fork their ranks from it."""
        os.environ[FORK_SERVER_VARIABLE] = self.name()

    def stop(self) -> None:
        """End the server and reap it, at this process's exit (it would die with this process anyway, by its
        parent-death signal; its ranks die with it)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@dataclass(frozen=True)
class Standby:
    """Ranks a fork server keeps forked ahead of requests: ``count`` of them, each having run ``prologue`` (the
    dotted name of the pools' prologue it stands in for; a request naming another gets a new child) and then
    ``warm_up`` (a dotted name, or None) in the server's environment (module docstring)."""

    count: int
    prologue: str
    warm_up: str | None = None


_BOOT = ("import json, sys; config = json.loads(sys.argv[1]); sys.path[:] = config['path']; "
         "from teparity.launch.forkserver import serve; serve(config)")


def start_server(preload: tuple[str, ...], log_dir: Path, env: dict[str, str] | None = None,
                 standby: Standby | None = None) -> StartedServer:
    """Start a fork server owned by this process (call it from the main thread: the server dies when the
    thread that started it ends), in ``env`` (default: this process's environment), keeping ``standby``
    ranks forked ahead where given. It returns at once; the server imports ``preload`` (their times go to
    ``log_dir/forkserver.log``, and so does anything it and its standby ranks print) and then serves."""
    log_dir.mkdir(parents=True, exist_ok=True)
    socket_dir = log_dir if len(str(log_dir / _SOCKET_NAME)) <= _MAX_SOCKET_PATH else Path(
        tempfile.mkdtemp(prefix="teparity-fs-"))
    os.chmod(socket_dir, 0o700)
    address = str(socket_dir / _SOCKET_NAME)
    if os.path.exists(address):
        os.unlink(address)
    log = log_dir / "forkserver.log"
    config = {"path": [p for p in sys.path], "address": address, "parent": os.getpid(), "log": str(log),
              "preload": list(preload), "standby": None if standby is None else asdict(standby)}
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != FORK_SERVER_VARIABLE}
    with open(log, "ab") as out:
        process = subprocess.Popen([sys.executable, "-c", _BOOT, json.dumps(config)], env=env,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=out, close_fds=True)
    return StartedServer(process, address, log)


# -- a client's side -------------------------------------------------------------------------------


class ForkedProcess:
    """A rank forked by the fork server, with the parts of ``multiprocessing.Process`` a pool uses: its pid,
    a sentinel that is ready once it ended, its exit code (negative: the signal), kill and join."""

    def __init__(self, pid: int, status: int, server: ForkServerClient) -> None:
        self.pid, self.sentinel, self._server = pid, status, server
        self.exitcode: int | None = None
        self._ended = False

    def _wait(self, timeout: float | None) -> bool:
        if self._ended:
            return True
        import select

        if not select.select([self.sentinel], [], [], timeout)[0]:
            return False
        data = os.read(self.sentinel, _STATUS.size)
        self._ended = True  # the sentinel stays open, and ready, until close()
        # No code: the server itself is gone (and the rank with it, by its parent-death signal).
        self.exitcode = _STATUS.unpack(data)[0] if len(data) == _STATUS.size else -signal.SIGKILL
        return True

    def is_alive(self) -> bool:
        return not self._wait(0)

    def join(self, timeout: float | None = None) -> None:
        self._wait(timeout)

    def kill(self) -> None:
        if not self._wait(0):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        """Release the sentinel (the pool is done with this rank: killed and joined)."""
        if self.sentinel >= 0:
            os.close(self.sentinel)
            self.sentinel, self._ended = -1, True


class ForkServerClient:
    """This process's connection to a fork server: ``start(target, args)`` forks ``target(connection,
    *args)`` there and returns the ``ForkedProcess`` and this side's end of its task pipe."""

    def __init__(self, address: str, pid: int, log: str, owner: str | None = None) -> None:
        self.address, self.log, self.owner = address, log, owner
        self.sock = self._connect(address, pid)
        try:
            self.sock.settimeout(CONNECT_DEADLINE_S)  # the server answers once its imports are done
            _send(self.sock, {"op": "hello", "pid": os.getpid()})
            reply, _ = _recv(self.sock)
            self.sock.settimeout(None)
        except (OSError, EOFError) as error:
            self.sock.close()
            raise self._failure(f"it did not answer ({type(error).__name__}: {error})", pid) from None
        #: Set once a fork request failed: the server is gone or wedged, and this connection with it.
        self.broken = False
        self.pid: int = reply["pid"]
        self.preload: tuple[str, ...] = tuple(reply["preload"])
        self.environment: tuple[tuple[str, str], ...] = tuple(tuple(item) for item in reply["environment"])
        #: How many of the files the server imported changed since, and the first few of them.
        self.changed: tuple[int, tuple[str, ...]] = (reply["changed"][0], tuple(reply["changed"][1]))
        #: The server's standby ranks (``Standby``), or None where it keeps none.
        self.standby: Standby | None = None if reply["standby"] is None else Standby(**reply["standby"])

    def standby_status(self) -> dict[str, Any]:
        """The server's standby ranks now: ``ready`` (done warming), ``warming``, ``taken`` so far, and
        ``failed`` (why it stopped forking them, or None)."""
        _send(self.sock, {"op": "standby"})
        return _recv(self.sock)[0]

    def wait_for_standby(self, timeout: float) -> float:
        """Seconds until every standby rank is ready (or the server stopped forking them); TimeoutError after
        ``timeout``. A timed run that starts once they are ready does not share the machine with their
        warm-up."""
        clock = time.monotonic()
        while self.standby is not None:
            status = self.standby_status()
            if status["failed"] or status["ready"] >= self.standby.count:
                break
            if time.monotonic() - clock > timeout:
                raise TimeoutError(f"the fork server's standby ranks are not ready after {timeout:g} s: {status}")
            time.sleep(0.2)
        return time.monotonic() - clock

    def _failure(self, what: str, pid: int) -> ForkServerError:
        alive = _alive(pid)
        try:
            tail = "".join(Path(self.log).read_text(errors="replace").splitlines(keepends=True)[-20:])
        except OSError as error:
            tail = f"(unreadable: {error})"
        reason = f"the fork server (pid {pid}, {'alive' if alive else 'gone'}) at {self.address}: {what}"
        return ForkServerError(f"{reason}; the tail of its log {self.log}:\n{tail}", reason)

    def _connect(self, address: str, pid: int) -> socket.socket:
        deadline = time.monotonic() + CONNECT_DEADLINE_S
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(address)
                return sock
            except (FileNotFoundError, ConnectionRefusedError) as error:  # not listening yet
                sock.close()
                if not _alive(pid) or time.monotonic() > deadline:
                    raise self._failure(f"cannot connect ({type(error).__name__})", pid) from None
                time.sleep(0.05)

    def start(self, target: Callable[..., Any], args: tuple[Any, ...], prologue: str | None = None) -> tuple[ForkedProcess, Connection]:
        """Fork ``target(connection, *args)``; ``prologue``: the dotted name of the prologue the target runs
        first, so that a standby rank that already ran it may serve the request."""
        import multiprocessing

        parent_end, child_end = multiprocessing.Pipe()
        status_read, status_write = os.pipe()
        call = pickle.dumps((target, args))
        payload = pickle.dumps((list(sys.path), os.getcwd(), dict(os.environ), call))
        try:
            _send(self.sock, {"op": "fork", "payload": payload, "prologue": prologue}, [child_end.fileno(), status_write])
        except OSError as error:
            self.broken = True
            os.close(status_read)
            parent_end.close()
            raise self._failure(f"the fork request failed ({error})", self.pid) from None
        finally:
            child_end.close()
            os.close(status_write)
        import select

        if select.select([status_read], [], [], 60)[0] and len(data := os.read(status_read, _STATUS.size)) == _STATUS.size:
            return ForkedProcess(_STATUS.unpack(data)[0], status_read, self), parent_end
        self.broken = True
        os.close(status_read)
        parent_end.close()
        raise self._failure("it forked no process for the request", self.pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- the server ------------------------------------------------------------------------------------


@dataclass
class _Client:
    pid: int | None = None
    children: set[int] = field(default_factory=set)


def _log(message: str) -> None:
    print(f"teparity fork server: {message}", flush=True)


Stamp = tuple[int, int]


def _stamp(path: str) -> Stamp | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def imported_files() -> dict[str, Stamp | None]:
    """Every file this process imported a module from, with its modification time and size."""
    files = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
    return {path: _stamp(path) for path in files if isinstance(path, str)}


def changed_files(stamps: dict[str, Stamp | None]) -> tuple[int, list[str]]:
    """How many of ``stamps``'s files changed (or went) since they were stamped, and the first few."""
    changed = sorted(path for path, stamp in stamps.items() if _stamp(path) != stamp)
    return len(changed), changed[:_CHANGED_NAMED]


def _die_with_parent(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the owner died before the prctl took effect
        os._exit(1)


@dataclass
class _StandbyRank:
    """A rank forked ahead of requests: its pid, the server's end of its socket, when it was forked, and once
    it said it is ready, the files it imported beyond the server's with their stamps (None: still warming)."""

    pid: int
    sock: socket.socket
    forked: float
    stamps: dict[str, Stamp | None] | None = None


class _Standbys:
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
                _standby(theirs, self.config, self.server_files, server, [ours, *inherited, *self.ranks])
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
            message, _ = _recv(sock)
        except (EOFError, OSError):  # it ended; its reaping says how
            self._retire(rank).close()
            return True
        rank.stamps = message["stamps"]
        _log(f"standby pid {rank.pid} ready {time.monotonic() - rank.forked:.1f} s after its fork, at {wall_clock()}")
        return True

    def take(self, prologue: str | None) -> _StandbyRank | None:
        """A standby for a request whose target runs ``prologue`` first: a ready one whose imported files are
        unchanged (a stale one is killed), else the longest warming; None where none fits."""
        if not self.config or prologue != self.config["prologue"]:
            return None
        for rank in sorted(self.ranks.values(), key=lambda rank: (rank.stamps is None, rank.forked)):
            if rank.stamps is not None and (changed := changed_files(rank.stamps))[0]:
                self._kill(rank)
                _log(f"standby pid {rank.pid} killed, not taken: {changed[0]} of the files it imported changed since "
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
            _log(f"no more standby ranks: {why}{killed}")


def serve(config: dict[str, Any]) -> NoReturn:
    """The fork server's main: listen, import the preload, then accept clients and fork for them until the
    owner dies (and with it this process)."""
    _die_with_parent(config["parent"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the owner, which ends the run
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(config["address"])
    listener.listen(128)
    served = environment()
    _log(f"pid {os.getpid()} for pid {config['parent']}, at {config['address']}")
    os.environ[FORK_SERVER_LOG_VARIABLE] = config["log"]
    for name in config["preload"]:
        importlib.import_module(name)
    del os.environ[FORK_SERVER_LOG_VARIABLE]
    stamps = imported_files()
    _log(f"ready at {wall_clock()}")
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up fd tells the loop to reap
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    clients: dict[socket.socket, _Client] = {}
    statuses: dict[int, int] = {}  # child pid -> write end of its status pipe
    standbys = _Standbys(config.get("standby"), selector, set(stamps))
    hello = {"pid": os.getpid(), "preload": config["preload"], "environment": served, "standby": config.get("standby")}
    own_uid, server = os.getuid(), os.getpid()

    def inherited() -> list[Any]:
        """What a child must close: the server's listener, selector, pipes and its clients' sockets."""
        return [listener, selector, wake_read, wake_write, *clients, *statuses.values()]

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            exitcode = os.waitstatus_to_exitcode(status)
            if (fd := statuses.pop(pid, None)) is not None:
                try:
                    os.write(fd, _STATUS.pack(exitcode))
                except OSError:  # the client is gone
                    pass
                os.close(fd)
            for client in clients.values():
                client.children.discard(pid)
            standbys.reaped(pid, exitcode)

    def drop(sock: socket.socket) -> None:
        client = clients.pop(sock)
        selector.unregister(sock)
        sock.close()
        for pid in client.children:  # the client is gone: so are its ranks
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _log(f"pid {client.pid} left; its {len(client.children)} running ranks killed")

    def started(client: _Client, pid: int, status: int) -> None:
        """Tell the client the pid of the process that runs its request."""
        statuses[pid] = status
        client.children.add(pid)
        try:
            os.write(status, _STATUS.pack(pid))
        except OSError:  # the client is gone; drop() kills the child
            pass

    def fork(client: _Client, message: dict[str, Any], fds: list[int]) -> None:
        task, status = fds
        if (rank := standbys.take(message.get("prologue"))) is not None:
            try:
                _send(rank.sock, {"op": "take", "payload": message["payload"]}, [task])
            except OSError:  # it ended meanwhile: fork anew
                _log(f"standby pid {rank.pid} could not be handed the request of pid {client.pid}; forking anew:\n{traceback.format_exc()}")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(rank.pid, signal.SIGKILL)
            else:
                _log(f"pid {client.pid} took standby pid {rank.pid} ({'ready' if rank.stamps is not None else 'still warming'})")
                os.close(task)
                started(client, rank.pid, status)
                return
            finally:
                rank.sock.close()
        try:
            pid = os.fork()
        except OSError:
            _log(f"fork for pid {client.pid} failed:\n{traceback.format_exc()}")
            os.close(task)
            os.close(status)
            return
        if pid == 0:
            _child(message["payload"], task, server, [*inherited(), *standbys.sockets()])
        os.close(task)
        started(client, pid, status)

    while True:
        if not any(client.children for client in clients.values()):  # between runs: replace the standbys taken
            standbys.fill(server, inherited())
        for key, _ in selector.select(timeout=5.0):
            if key.fileobj is listener:
                sock, _address = listener.accept()
                uid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
                if uid != own_uid:
                    _log(f"refused a client of uid {uid}")
                    sock.close()
                    continue
                clients[sock] = _Client()
                selector.register(sock, selectors.EVENT_READ)
            elif key.fileobj is wake_read:
                try:
                    os.read(wake_read, 4096)
                except BlockingIOError:
                    pass
            elif not standbys.readable(key.fileobj):
                sock = key.fileobj
                client = clients[sock]
                try:
                    message, fds = _recv(sock, max_fds=2)
                except (EOFError, OSError):
                    drop(sock)
                    continue
                if message["op"] == "hello":
                    client.pid = message["pid"]
                    _log(f"serving pid {client.pid} from {wall_clock()}")
                    reply: Any = hello | {"changed": changed_files(stamps)}
                elif message["op"] == "standby":
                    reply = standbys.status()
                elif message["op"] == "fork" and len(fds) == 2:
                    fork(client, message, fds)
                    continue
                else:
                    _log(f"pid {client.pid} sent a malformed request: {message.get('op')!r} with {len(fds)} fds")
                    for fd in fds:
                        os.close(fd)
                    continue
                try:
                    _send(sock, reply)
                except OSError:  # gone already
                    drop(sock)
        reap()


def _leave_server(server: int, inherited: list[Any]) -> None:
    """In a child of the server: die with it, close its descriptors, and drop its signal handlers."""
    _die_with_parent(server)
    for thing in inherited:
        if isinstance(thing, int):
            os.close(thing)
        else:
            thing.close()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _run_call(payload: bytes, task: int) -> None:
    """Take the client's environment, path and working directory, then run its call on its task pipe (the call
    is unpickled only now, so that the server imports nothing but its preload)."""
    path, cwd, environ, call = pickle.loads(payload)
    os.environ.clear()
    os.environ.update(environ)
    sys.path[:] = path
    os.chdir(cwd)
    target, args = pickle.loads(call)
    target(Connection(task), *args)


def _exit_child(body: Callable[[], None]) -> NoReturn:
    """Run a child's ``body`` and exit with its status (``Process.exitcode``'s convention), flushing its output."""
    code = 1
    try:
        body()
        code = 0
    except SystemExit as error:
        code = error.code if isinstance(error.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _child(payload: bytes, task: int, server: int, inherited: list[Any]) -> NoReturn:
    """In a child forked for a request: leave the server behind, then run the call."""

    def body() -> None:
        _leave_server(server, inherited)
        _run_call(payload, task)

    _exit_child(body)


#: In a rank that a request took from the standby ranks: the files it imported ahead with their stamps, and
#: what it did ahead (``check_standby``).
_taken_standby: tuple[dict[str, Stamp | None], str] | None = None


def _standby(sock: socket.socket, config: dict[str, Any], server_files: set[str], server: int,
             inherited: list[Any]) -> NoReturn:
    """In a standby rank: leave the server behind, run the prologue and warm-up in the server's environment,
    say so with the files it imported beyond the server's, then wait until a request takes it and run that."""

    def body() -> None:
        global _taken_standby
        _leave_server(server, inherited)
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
            _send(sock, {"op": "ready", "stamps": stamps})
        try:
            message, fds = _recv(sock, max_fds=1)  # what was sent before the server closed its end stays readable
        except EOFError:  # the server is gone (its death signal follows) or it killed this standby
            os._exit(0)
        sock.close()
        _taken_standby = (stamps, ahead)
        _run_call(message["payload"], fds[0])

    _exit_child(body)


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
