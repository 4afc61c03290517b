"""Where a run's time went: each test's worker, start and duration (setup to teardown), and a summary
line: the busiest worker against the mean, how busy the workers were, the slowest tests.

A gate run's wall time is its busiest worker's, and a test's duration swells with the CPU its neighbours
take, so both are recorded: the parity report's ``timeline`` is what a speed claim rests on.
"""

from __future__ import annotations

import dataclasses
from typing import Any


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
        )

    def to_json(self, finished: float) -> dict[str, Any]:
        return {
            "wall_s": round(finished - self.started, 3),
            "tests": [
                {"nodeid": s.nodeid, "worker": s.worker, "start_s": round(s.start - self.started, 3),
                 "duration_s": round(s.duration, 3)}
                for s in sorted(self.spans.values(), key=lambda s: (s.start, s.nodeid))
            ],
        }
