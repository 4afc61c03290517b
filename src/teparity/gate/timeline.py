"""Where a run's time went: each test's worker, start and duration (setup to teardown), the run's phases
(when the process started, the xdist workers were up and had collected, the first test started, the workers
went down, the session ended), and a summary line: the busiest worker against the mean, how busy the
workers were, the slowest tests, the phases.

A gate run's wall time is its busiest worker's, and a test's duration swells with the CPU its neighbours
take, so both are recorded: the parity report's ``timeline`` is what a speed claim rests on. The phases say
what the tests' own time leaves out: a run whose first test starts 8 s in spends those seconds starting.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

#: The phases a run marks, in the order they happen (``Timeline.mark``); a phase a run has none of (no
#: xdist workers) is left out. ``session_finished`` is the end of ``wall_s``; ``sessionfinish_done``, after
#: every plugin's session finish, is in the report only.
PHASES = ("process_started", "session_started", "workers_ready", "workers_collected", "collected",
          "first_test_started", "last_test_finished", "workers_down", "session_finished", "sessionfinish_done")


@dataclasses.dataclass
class Span:
    nodeid: str
    worker: str
    start: float
    stop: float

    @property
    def duration(self) -> float:
        return self.stop - self.start


@dataclasses.dataclass
class Timeline:
    #: The epoch second the run started (the parity reporter's creation, at pytest_configure).
    started: float
    spans: dict[str, Span] = dataclasses.field(default_factory=dict)
    #: Phase name -> epoch second (``PHASES``); a phase marked again keeps its latest time (the last worker).
    marks: dict[str, float] = dataclasses.field(default_factory=dict)

    def mark(self, phase: str, when: float) -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; the phases are {', '.join(PHASES)}")
        self.marks[phase] = max(when, self.marks.get(phase, when))

    def phases(self) -> dict[str, float]:
        """Each marked phase, and the first test's start and the last test's end, in seconds from ``started``
        (the process's start is negative), in ``PHASES`` order."""
        marks = dict(self.marks)
        if self.spans:
            marks["first_test_started"] = min(s.start for s in self.spans.values())
            marks["last_test_finished"] = max(s.stop for s in self.spans.values())
        return {phase: round(marks[phase] - self.started, 3) for phase in PHASES if phase in marks}

    def record(self, nodeid: str, worker: str, start: float, stop: float) -> None:
        """One phase (setup, call or teardown) of a test: its span grows to hold them all."""
        if (span := self.spans.get(nodeid)) is None:
            self.spans[nodeid] = Span(nodeid, worker, start, stop)
        else:
            span.start, span.stop = min(span.start, start), max(span.stop, stop)

    def busy_by_worker(self) -> dict[str, float]:
        busy: dict[str, float] = {}
        for span in self.spans.values():
            busy[span.worker] = busy.get(span.worker, 0.0) + span.duration
        return busy

    def summary(self, finished: float, slowest: int = 3) -> str:
        if not self.spans:
            return "no test ran"
        busy = self.busy_by_worker()
        wall = finished - self.started
        total = sum(busy.values())
        worker, most = max(busy.items(), key=lambda item: item[1])
        tests = sorted(self.spans.values(), key=lambda s: s.duration, reverse=True)[:slowest]
        return (
            f"{len(self.spans)} tests took {total:.1f} s on {len(busy)} worker(s) in {wall:.1f} s of wall time "
            f"(workers busy {100 * total / (wall * len(busy)):.0f}% of it); the busiest, {worker}, {most:.1f} s "
            f"(mean {total / len(busy):.1f} s); slowest: "
            + ", ".join(f"{s.nodeid.rsplit('::', 1)[-1]} {s.duration:.1f} s" for s in tests)
            + "; " + describe_phases(self.phases())
        )

    def to_json(self, finished: float) -> dict[str, Any]:
        return {
            "wall_s": round(finished - self.started, 3),
            "phases": self.phases(),
            "tests": [
                {"nodeid": s.nodeid, "worker": s.worker, "start_s": round(s.start - self.started, 3),
                 "duration_s": round(s.duration, 3)}
                for s in sorted(self.spans.values(), key=lambda s: (s.start, s.nodeid))
            ],
        }


def describe_phases(phases: dict[str, float]) -> str:
    """``Timeline.phases`` as a line."""
    return "seconds from configure: " + ", ".join(f"{phase.replace('_', ' ')} {at:.1f}" for phase, at in phases.items())


def process_started() -> float | None:
    """The epoch second this process started (Linux: its start in clock ticks after boot, from /proc, against
    the boot-time clock), or None where that cannot be read: the seconds before ``pytest_configure``
    (Python's start, pytest's and the plugins' imports) are part of a run's time too."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - age
