"""The fork server this process's forked ranks come from: the run's own (started by the process that starts the
run, ``start_fork_server``, and named to its workers), or one a command that runs pytest several times started
before the run (``python -m teparity serve``), where it fits the run (``unfit``: the same preload, the same
environment, no imported file changed since)."""

from __future__ import annotations

import atexit
import json
import os
import sys
from pathlib import Path
from typing import Any

from teparity.launch.fork_client import (
    FORK_SERVER_VARIABLE,
    ForkServerClient,
    ForkServerError,
    StartedServer,
    environment,
    start_server,
)

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
