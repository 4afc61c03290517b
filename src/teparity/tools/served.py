"""One fork server for every pytest run that a command starts (``python -m teparity serve``, ``repeat``,
``bench``'s served mode), so that the runs fork their ranks without each paying torch's and TE's imports.

A run's controller takes the server named in its environment where it fits the run: the same preload,
the same environment, and none of its imported files changed since it imported them
(``teparity.launch.pool.fork_server_for_run``); else it starts its own and its header says why. The server
lives as long as the command and dies with it, and its ranks with it, as a run's own does with the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from teparity.gate.ranks import FORK_PRELOAD
from teparity.launch import rank_env
from teparity.launch.forkserver import FORK_SERVER_VARIABLE, ForkServerClient, start_server


@dataclass(frozen=True)
class Served:
    """A running shared fork server: the environment that names it to a run, its pid, its log, and the
    seconds it took to import its preload (none: not waited for)."""

    env: dict[str, str]
    pid: int
    log: Path
    ready_s: float | None


@contextmanager
def served(owner: str, log_dir: Path, *, wait: bool = False) -> Iterator[Served]:
    """Start a fork server in the environment that a run gives its ranks (the rank defaults applied, as the
    run's controller applies them) and yield what names it to the runs: this process's environment with
    ``FORK_SERVER_VARIABLE`` set. ``wait``: return once it imported its preload (so that a timed run does
    not share the machine with its imports). ``owner`` is what the runs' headers call it."""
    started = start_server(FORK_PRELOAD, log_dir, env=rank_env.with_defaults(os.environ))
    try:
        ready_s = None
        if wait:
            clock = time.monotonic()
            ForkServerClient(started.address, started.process.pid, str(started.log), owner).sock.close()
            ready_s = round(time.monotonic() - clock, 1)
        yield Served({**os.environ, FORK_SERVER_VARIABLE: started.name(owner)}, started.process.pid, started.log, ready_s)
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
