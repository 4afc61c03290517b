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

Standby ranks (``teparity.launch.standby``): a server that outlives its runs keeps ranks forked ahead of
requests. The client side is ``teparity.launch.fork_client``; the framing ``teparity.launch.wire``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import selectors
import signal
import socket
import struct
import traceback
from dataclasses import dataclass, field
from typing import Any, NoReturn

from teparity.launch.fork_client import FORK_SERVER_LOG_VARIABLE, environment
from teparity.launch.forked import child, die_with_parent, log
from teparity.launch.outcome import wall_clock
from teparity.launch.stamps import changed_files, imported_files
from teparity.launch.standby import Standbys
from teparity.launch.wire import STATUS, recv, send


@dataclass
class _Client:
    pid: int | None = None
    children: set[int] = field(default_factory=set)


def serve(config: dict[str, Any]) -> NoReturn:
    """The fork server's main: listen, import the preload, then accept clients and fork for them until the
    owner dies (and with it this process)."""
    die_with_parent(config["parent"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the owner, which ends the run
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(config["address"])
    listener.listen(128)
    served = environment()
    log(f"pid {os.getpid()} for pid {config['parent']}, at {config['address']}")
    os.environ[FORK_SERVER_LOG_VARIABLE] = config["log"]
    for name in config["preload"]:
        importlib.import_module(name)
    del os.environ[FORK_SERVER_LOG_VARIABLE]
    _Server(config, listener, served).run()


class _Server:
    """A fork server that has imported its preload: its listener and clients, the children it forked and their
    status pipes, its standby ranks."""

    def __init__(self, config: dict[str, Any], listener: socket.socket, served: tuple[tuple[str, str], ...]) -> None:
        self.stamps = imported_files()
        log(f"ready at {wall_clock()}")
        self.listener = listener
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up fd tells the loop to reap
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.selector.register(self.wake_read, selectors.EVENT_READ)
        self.clients: dict[socket.socket, _Client] = {}
        self.statuses: dict[int, int] = {}  # child pid -> write end of its status pipe
        self.standbys = Standbys(config.get("standby"), self.selector, set(self.stamps))
        self.hello = {"pid": os.getpid(), "preload": config["preload"], "environment": served,
                      "standby": config.get("standby")}
        self.own_uid, self.pid = os.getuid(), os.getpid()

    def run(self) -> NoReturn:
        while True:
            if not any(client.children for client in self.clients.values()):  # between runs: replace the standbys taken
                self.standbys.fill(self.pid, self.inherited())
            for key, _ in self.selector.select(timeout=5.0):
                if key.fileobj is self.listener:
                    self.accept()
                elif key.fileobj is self.wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_read, 4096)
                elif not self.standbys.readable(key.fileobj):
                    self.answer(key.fileobj)  # type: ignore[arg-type]
            self.reap()

    def inherited(self) -> list[Any]:
        """What a child must close: the server's listener, selector, pipes and its clients' sockets."""
        return [self.listener, self.selector, self.wake_read, self.wake_write, *self.clients, *self.statuses.values()]

    def accept(self) -> None:
        sock, _address = self.listener.accept()
        uid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
        if uid != self.own_uid:
            log(f"refused a client of uid {uid}")
            sock.close()
            return
        self.clients[sock] = _Client()
        self.selector.register(sock, selectors.EVENT_READ)

    def answer(self, sock: socket.socket) -> None:
        """Read a client's request and answer it (a fork request is answered on its status pipe)."""
        client = self.clients[sock]
        try:
            message, fds = recv(sock, max_fds=2)
        except (EOFError, OSError):
            self.drop(sock)
            return
        if message["op"] == "hello":
            client.pid = message["pid"]
            log(f"serving pid {client.pid} from {wall_clock()}")
            reply: Any = self.hello | {"changed": changed_files(self.stamps)}
        elif message["op"] == "standby":
            reply = self.standbys.status()
        elif message["op"] == "fork" and len(fds) == 2:
            self.fork(client, message, fds)
            return
        else:
            log(f"pid {client.pid} sent a malformed request: {message.get('op')!r} with {len(fds)} fds")
            for fd in fds:
                os.close(fd)
            return
        try:
            send(sock, reply)
        except OSError:  # gone already
            self.drop(sock)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            exitcode = os.waitstatus_to_exitcode(status)
            if (fd := self.statuses.pop(pid, None)) is not None:
                with contextlib.suppress(OSError):  # the client is gone
                    os.write(fd, STATUS.pack(exitcode))
                os.close(fd)
            for client in self.clients.values():
                client.children.discard(pid)
            self.standbys.reaped(pid, exitcode)

    def drop(self, sock: socket.socket) -> None:
        client = self.clients.pop(sock)
        self.selector.unregister(sock)
        sock.close()
        for pid in client.children:  # the client is gone: so are its ranks
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        log(f"pid {client.pid} left; its {len(client.children)} running ranks killed")

    def started(self, client: _Client, pid: int, status: int) -> None:
        """Tell the client the pid of the process that runs its request."""
        self.statuses[pid] = status
        client.children.add(pid)
        with contextlib.suppress(OSError):  # the client is gone; drop() kills the child
            os.write(status, STATUS.pack(pid))

    def fork(self, client: _Client, message: dict[str, Any], fds: list[int]) -> None:
        task, status = fds
        if self.hand_to_standby(client, message, task, status):
            return
        try:
            pid = os.fork()
        except OSError:
            log(f"fork for pid {client.pid} failed:\n{traceback.format_exc()}")
            os.close(task)
            os.close(status)
            return
        if pid == 0:
            child(message["payload"], task, self.pid, [*self.inherited(), *self.standbys.sockets()])
        os.close(task)
        self.started(client, pid, status)

    def hand_to_standby(self, client: _Client, message: dict[str, Any], task: int, status: int) -> bool:
        """Hand the request to a standby rank where one fits it; False where none does (or the one taken ended)."""
        if (rank := self.standbys.take(message.get("prologue"))) is None:
            return False
        try:
            send(rank.sock, {"op": "take", "payload": message["payload"]}, [task])
        except OSError:  # it ended meanwhile: fork anew
            log(f"standby pid {rank.pid} could not be handed the request of pid {client.pid}; forking anew:\n"
                f"{traceback.format_exc()}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(rank.pid, signal.SIGKILL)
            return False
        else:
            log(f"pid {client.pid} took standby pid {rank.pid} ({'ready' if rank.stamps is not None else 'still warming'})")
            os.close(task)
            self.started(client, rank.pid, status)
            return True
        finally:
            rank.sock.close()
