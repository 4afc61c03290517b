"""The client side of the fork server (``teparity.launch.forkserver``): start one owned by this process
(``start_server``), connect to one (``ForkServerClient``: hello, fork, standby status) and hold a rank it forked
(``ForkedProcess``, the parts of ``multiprocessing.Process`` a pool uses)."""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from teparity.launch.standby import Standby
from teparity.launch.wire import STATUS, recv, send

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


#: How long a client waits for the server to listen, and then to finish its imports and answer.
CONNECT_DEADLINE_S = 300.0


_SOCKET_NAME = "forkserver.sock"


#: ``sockaddr_un`` holds 108 bytes with its terminating NUL.
_MAX_SOCKET_PATH = 100


def environment() -> tuple[tuple[str, str], ...]:
    """This process's environment as the preloaded imports read it (``PER_PROCESS_VARIABLES`` left out)."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k not in PER_PROCESS_VARIABLES))


class ForkServerError(RuntimeError):
    """The fork server cannot be started or reached, or it failed to fork; the message has its evidence (the
    tail of the server's log), ``reason`` the line before it (what a header can quote)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


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
        data = os.read(self.sentinel, STATUS.size)
        self._ended = True  # the sentinel stays open, and ready, until close()
        # No code: the server itself is gone (and the rank with it, by its parent-death signal).
        self.exitcode = STATUS.unpack(data)[0] if len(data) == STATUS.size else -signal.SIGKILL
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
            send(self.sock, {"op": "hello", "pid": os.getpid()})
            reply, _ = recv(self.sock)
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
        send(self.sock, {"op": "standby"})
        return recv(self.sock)[0]

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
            send(self.sock, {"op": "fork", "payload": payload, "prologue": prologue}, [child_end.fileno(), status_write])
        except OSError as error:
            self.broken = True
            os.close(status_read)
            parent_end.close()
            raise self._failure(f"the fork request failed ({error})", self.pid) from None
        finally:
            child_end.close()
            os.close(status_write)
        import select

        if select.select([status_read], [], [], 60)[0] and len(data := os.read(status_read, STATUS.size)) == STATUS.size:
            return ForkedProcess(STATUS.unpack(data)[0], status_read, self), parent_end
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
