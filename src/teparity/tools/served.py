"""One fork server for every pytest run that a command starts (``python -m teparity serve``, ``repeat``,
``bench``'s served mode), so that the runs fork their ranks without each paying torch's and TE's imports.

A run's controller takes the server named in its environment where it fits the run: the same preload,
the same environment, and none of its imported files changed since it imported them
(``teparity.launch.fork_choice.fork_server_for_run``); else it starts its own and its header says why. The server
lives as long as the command and dies with it, and its ranks with it, as a run's own does with the run.

The server keeps standby ranks (``teparity.launch.standby.Standby``): forked ahead, each having run the
gate's rank prologue (``teparity.inrank.task.preload``: thunder's import, CUDA) and warm-up (TE's first FP8
steps) before a run asks for ranks, so that a run's ranks start with that done. Between runs the server forks
new ones for those taken.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teparity.gate.ranks import FORK_PRELOAD
from teparity.inrank.task import preload, warm_up
from teparity.launch import rank_env
from teparity.launch.fork_client import FORK_SERVER_VARIABLE, ForkServerClient, StartedServer, start_server
from teparity.launch.outcome import qualified_name
from teparity.launch.standby import Standby

#: How long a command waits for the standby ranks' warm-up before a timed run (they are ready in seconds).
STANDBY_DEADLINE_S = 300.0
#: The most standby ranks kept by default: each holds its imports and, on a GPU, a CUDA context.
MAX_DEFAULT_STANDBY = 32


def default_standby_ranks() -> int:
    """Two standby ranks per core, at most ``MAX_DEFAULT_STANDBY``: a run at ``-n N`` with 2-rank tests starts 2N
    ranks, and N is at most the cores."""
    return min(2 * (os.cpu_count() or 1), MAX_DEFAULT_STANDBY)


@dataclass(frozen=True)
class Served:
    """A running shared fork server: the environment that names it to a run, the server, the seconds it took
    to import its preload and then to have its standby ranks ready (none: not waited for)."""

    env: dict[str, str]
    started: StartedServer
    owner: str
    ready_s: float | None
    standby_ready_s: float | None

    @property
    def pid(self) -> int:
        return self.started.process.pid

    @property
    def log(self) -> Path:
        return self.started.log

    def wait_for_standby(self) -> float:
        """Seconds until its standby ranks are all ready (after a run took some, it forks new ones), so that
        a timed run does not share the machine with their warm-up."""
        with _connected(self.started, self.owner) as client:
            return round(client.wait_for_standby(STANDBY_DEADLINE_S), 1)

    def standby_status(self) -> dict[str, Any]:
        """Its standby ranks now (``ForkServerClient.standby_status``): how many runs took, and whether they failed."""
        with _connected(self.started, self.owner) as client:
            return client.standby_status()


def ready_line(served: Served, standby_ranks: int) -> str:
    """What a command that waited for ``served`` says of it before its first run."""
    standby = f"; its {standby_ranks} standby ranks were ready {served.standby_ready_s} s later" if standby_ranks else ""
    return f"its fork server (pid {served.pid}) imported its preload in {served.ready_s} s{standby}, before any run"


@contextmanager
def _connected(started: StartedServer, owner: str) -> Iterator[ForkServerClient]:
    """A connection to ``started`` for the duration (its hello waits until the server imported its preload)."""
    client = ForkServerClient(started.address, started.process.pid, str(started.log), owner)
    try:
        yield client
    finally:
        client.sock.close()


@contextmanager
def served(owner: str, log_dir: Path, *, wait: bool = False, standby_ranks: int = 0) -> Iterator[Served]:
    """Start a fork server in the environment that a run gives its ranks (the rank defaults applied, as the
    run's controller applies them) with ``standby_ranks`` ranks forked ahead, and yield what names it to the
    runs: this process's environment with ``FORK_SERVER_VARIABLE`` set. ``wait``: return once it imported
    its preload and its standby ranks are ready (so that a timed run does not share the machine with
    either). ``owner`` is what the runs' headers call it."""
    standby = Standby(standby_ranks, qualified_name(preload), qualified_name(warm_up)) if standby_ranks else None
    started = start_server(FORK_PRELOAD, log_dir, env=rank_env.with_defaults(os.environ), standby=standby)
    try:
        ready_s = standby_ready_s = None
        if wait:
            clock = time.monotonic()
            with _connected(started, owner) as client:
                ready_s = round(time.monotonic() - clock, 1)
                standby_ready_s = round(client.wait_for_standby(STANDBY_DEADLINE_S), 1) if standby else None
        yield Served({**os.environ, FORK_SERVER_VARIABLE: started.name(owner)}, started, owner, ready_s, standby_ready_s)
    finally:
        started.stop()


def forks_ranks(pytest_args: list[str]) -> bool:
    """Whether a run with these arguments forks its ranks: ``--teparity-ranks`` (its last value, as pytest
    reads it) is forked, the default."""
    mode = "forked"
    for number, arg in enumerate(pytest_args):
        if arg.startswith("--teparity-ranks="):
            mode = arg.split("=", 1)[1]
        elif arg == "--teparity-ranks" and number + 1 < len(pytest_args):
            mode = pytest_args[number + 1]
    return mode == "forked"
