"""What a process forked by the fork server does before it runs a client's call: die with the server, close the
server's descriptors and drop its signal handlers, take the client's environment, path and working directory,
and exit with the call's status."""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, NoReturn

_PR_SET_PDEATHSIG = 1


def log(message: str) -> None:
    print(f"teparity fork server: {message}", flush=True)


def die_with_parent(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the owner died before the prctl took effect
        os._exit(1)


def leave_server(server: int, inherited: list[Any]) -> None:
    """In a child of the server: die with it, close its descriptors, and drop its signal handlers."""
    die_with_parent(server)
    for thing in inherited:
        if isinstance(thing, int):
            os.close(thing)
        else:
            thing.close()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_call(payload: bytes, task: int) -> None:
    """Take the client's environment, path and working directory, then run its call on its task pipe (the call
    is unpickled only now, so that the server imports nothing but its preload)."""
    path, cwd, environ, call = pickle.loads(payload)
    os.environ.clear()
    os.environ.update(environ)
    sys.path[:] = path
    os.chdir(cwd)
    target, args = pickle.loads(call)
    target(Connection(task), *args)


def exit_child(body: Callable[[], None]) -> NoReturn:
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


def child(payload: bytes, task: int, server: int, inherited: list[Any]) -> NoReturn:
    """In a child forked for a request: leave the server behind, then run the call."""

    def body() -> None:
        leave_server(server, inherited)
        run_call(payload, task)

    exit_child(body)
