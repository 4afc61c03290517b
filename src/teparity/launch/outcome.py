"""A failed multi-rank run, as evidence: which rank raised, died or hung, with its traceback, exit status or
stack, and the command that re-runs it. Every launch mode reports failures through ``RanksFailed``."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

Backend = Literal["gloo", "nccl"]

DEFAULT_TIMEOUT_S = 180.0
#: The process-group timeout: shorter than the harness deadline, so NCCL/gloo raise first when they can.
DEFAULT_PG_TIMEOUT_S = 60.0
#: How long the other ranks may run on once one rank has failed (they are usually stuck in a collective).
FAILURE_GRACE_S = 10.0
STACK_DUMP_WAIT_S = 2.0
#: How long ranks may take to start (spawn, imports) and join their group before they count as hung there: a
#: loaded 2-core runner took over 20 s. A run's own deadline counts from the joined group, when it is longer.
START_DEADLINE_S = 300.0
LOG_TAIL_LINES = 80
#: The header of one rank's block in a ``RanksFailed`` message: its rank and what it did (raised, hung, ...).
RANK_BLOCK = re.compile(r"^--- rank (?P<rank>\d+): (?P<summary>.*) ---$", re.M)


def rank_traceback() -> str:
    """The traceback of the exception a rank is handling, from the task it ran down: the launcher's own frame (fresh,
    warm or torchrun) is left out, so that one failure reads the same whichever launch mode ran it (bench compares
    their evidence)."""
    kind, error, tb = sys.exc_info()
    return "".join(traceback.format_exception(kind, error, tb.tb_next if tb is not None else None))


def failed_header(failed: int, ranks: int, what: str, backend: str, timeout: float | None = None,
                  pg_timeout: float | None = None) -> str:
    """The first line of a ``RanksFailed``, the same in every launch mode (how the ranks were launched is the footer's)."""
    limits = f", harness deadline {timeout:g} s, process-group timeout {pg_timeout:g} s" if timeout is not None else ""
    return f"{failed} of {ranks} ranks failed ({what}, backend {backend}{limits})"


def pg_timeout_for(timeout: float, pg_timeout: float | None) -> float:
    """The process-group timeout a run uses: the one asked for, else half the harness deadline (at most
    ``DEFAULT_PG_TIMEOUT_S``)."""
    return pg_timeout if pg_timeout is not None else min(DEFAULT_PG_TIMEOUT_S, timeout / 2)


@dataclasses.dataclass(frozen=True)
class RankFailure:
    rank: int
    #: raised | exited | signaled | hung
    kind: str
    summary: str
    detail: str


class RanksFailed(AssertionError):
    """One or more ranks raised, died or hung. ``failures`` has one entry per failing rank."""

    def __init__(self, failures: list[RankFailure], *, pids: list[int], header: str, footer: str) -> None:
        self.failures = failures
        self.pids = pids
        blocks = [f"{block_header(f.rank, f.summary)}\n{f.detail.rstrip()}" for f in failures]
        super().__init__("\n".join([header, *blocks, footer]))

    @property
    def evidence(self) -> dict[str, Any]:
        """What a known-defect signature may read: each failing rank's kind (raised, hung, signaled, exited)
        and detail (its traceback, stack or log tail)."""
        return {"failures": [{"rank": f.rank, "kind": f.kind, "detail": f.detail} for f in self.failures]}


def block_header(rank: int, summary: str) -> str:
    """The line that opens a rank's block in a ``RanksFailed`` message (what ``RANK_BLOCK`` reads back)."""
    return f"--- rank {rank}: {summary} ---"


def log_tail(workdir: Path, rank: int) -> str:
    path = workdir / f"rank{rank}.log"
    if not path.exists():
        return "(no log)"
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-LOG_TAIL_LINES:]) or "(empty log)"


def rerun_line() -> str:
    current = os.environ.get("PYTEST_CURRENT_TEST")
    if not current:
        return f"re-run: {shlex.join([sys.executable, *sys.argv])}"
    nodeid = current.rsplit(" (", 1)[0]
    return f"re-run: python -m pytest {shlex.quote(nodeid)} -p no:xdist"


def wall_clock() -> str:
    """The time of day to the millisecond, which a run's logs (ranks, fork server) stamp their events with, so
    that one run's processes can be laid on one timeline."""
    now = time.time()
    return f"{time.strftime('%H:%M:%S', time.localtime(now))}.{int(now * 1000) % 1000:03d}"


def task_line(label: str, seconds: float) -> str:
    """What a rank logs when a run ends: which function it ran and for how long (``bench`` sums them)."""
    return f"teparity rank task: {label} {seconds:.2f} s"


def qualified_name(fn: Callable[..., Any]) -> str:
    """How a failure names the function a run ran."""
    return f"{fn.__module__}.{fn.__qualname__}"


def ended(rank: int, exitcode: int | None, workdir: Path) -> RankFailure:
    """The failure of a rank that ended without a result: killed by a signal, or exited."""
    if exitcode is not None and exitcode < 0:
        return RankFailure(rank, "signaled", f"killed by signal {signal.Signals(-exitcode).name}", log_tail(workdir, rank))
    return RankFailure(rank, "exited", f"exited with code {exitcode} and no result", log_tail(workdir, rank))


def hang_reason(timeout: float, *, after_failure: bool, since: str) -> str:
    """Why a rank still running is reported as hung (its stack follows in its log); ``since`` says when the
    deadline's clock started ("the run was sent")."""
    why = (
        f"hung: still running {FAILURE_GRACE_S:g} s after another rank failed"
        if after_failure
        else f"hung: still running at the harness deadline ({timeout:g} s after {since})"
    )
    return why + "; its Python stack (faulthandler):"


def dump_stacks(pids: Iterable[int | None]) -> None:
    """Ask each rank for every thread's stack (faulthandler, on SIGUSR1) and give them time to write it."""
    for pid in pids:
        try:
            if pid is not None:
                os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
    time.sleep(STACK_DUMP_WAIT_S)
