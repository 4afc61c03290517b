"""The parity report: per check and executor, the outcome and its evidence; a terminal table and JSON.

Rows are checks (``@pytest.mark.check(NAME)``), columns are TE executors, cells aggregate every test
of that check and executor: FAIL if any failed, else pass if any passed, else skip with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Literal

from teparity.versions import EXECUTOR_KINDS

Outcome = Literal["pass", "FAIL", "skip", "xfail"]
NO_EXECUTOR = "-"
SCHEMA = "teparity.parity-report/1"
EVIDENCE_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class TestOutcome:
    nodeid: str
    outcome: Outcome
    #: For a pass: what the test recorded as evidence; for a failure: the head of its message; for a
    #: skip: the reason.
    evidence: str


@dataclasses.dataclass
class Cell:
    tests: list[TestOutcome] = dataclasses.field(default_factory=list)

    @property
    def outcome(self) -> Outcome:
        outcomes = {t.outcome for t in self.tests}
        if "FAIL" in outcomes:
            return "FAIL"
        for outcome in ("pass", "xfail"):
            if outcome in outcomes:
                return outcome
        return "skip"

    def short(self) -> str:
        outcome = self.outcome
        if outcome in ("skip", "xfail"):
            reason = next(t.evidence for t in self.tests if t.outcome == outcome)
            return f"{outcome} ({reason})"
        if outcome == "FAIL":
            failed = sum(1 for t in self.tests if t.outcome == "FAIL")
            return f"FAIL ({failed}/{len(self.tests)})"
        return f"pass ({len(self.tests)})" if len(self.tests) > 1 else "pass"


@dataclasses.dataclass
class ParityReport:
    environment: dict[str, Any]
    cells: dict[tuple[str, str], Cell] = dataclasses.field(default_factory=dict)

    def record(self, check: str, executor: str | None, test: TestOutcome) -> None:
        self.cells.setdefault((check, executor or NO_EXECUTOR), Cell()).tests.append(test)

    def checks(self) -> list[str]:
        return sorted({check for check, _ in self.cells})

    def executors(self) -> list[str]:
        """Columns: thunder's TE executors in their usual order, then any others, then executor-free checks."""
        order = {kind: i for i, kind in enumerate(EXECUTOR_KINDS)}
        return sorted({e for _, e in self.cells}, key=lambda e: (e == NO_EXECUTOR, order.get(e, len(order)), e))

    def table(self, width: int = 60) -> str:
        """Rows: checks; columns: executors; cells: pass / FAIL / skip (reason)."""
        executors = self.executors()
        header = ["check", *executors]
        rows = [header]
        for check in self.checks():
            row = [check]
            for executor in executors:
                cell = self.cells.get((check, executor))
                text = cell.short() if cell else ""
                row.append(text if len(text) <= width else text[: width - 3] + "...")
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = ["  ".join(value.ljust(w) for value, w in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "environment": self.environment,
            "results": [
                {
                    "check": check,
                    "executor": executor,
                    "outcome": cell.outcome,
                    "tests": [dataclasses.asdict(t) for t in cell.tests],
                }
                for (check, executor), cell in sorted(self.cells.items())
            ],
        }

    def write(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ParityReport:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a teparity parity report (schema {data.get('schema')!r}, expected {SCHEMA!r})")
        report = cls(environment=data["environment"])
        for result in data["results"]:
            for test in result["tests"]:
                report.record(result["check"], result["executor"], TestOutcome(**test))
        return report


# -- the cross-environment compatibility matrix --------------------------------------------------------

MATRIX_CELL_CHARS = 90


def _markdown(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _headline(evidence: str) -> str:
    """The part of a failure that says what differs: no exception class, no "N difference(s), first:"."""
    evidence = re.sub(r"^[\w.]*(Error|Failed): ", "", evidence)
    return re.sub(r"^\d+ [\w ]*?\(s\), first: ", "", evidence)


def _cell(cell: Cell) -> str:
    outcome = cell.outcome
    if outcome == "pass":
        return "pass"
    first = next(t for t in cell.tests if t.outcome == outcome)
    detail = _markdown(_headline(first.evidence))
    if len(detail) > MATRIX_CELL_CHARS:
        detail = detail[: MATRIX_CELL_CHARS - 3] + "..."
    return f"{outcome} ({detail})"


def compatibility_matrix(reports: list[tuple[str, ParityReport]]) -> str:
    """Markdown: rows (thunder, TE, executor), columns the checks, cells pass / FAIL (what) / skip (why)."""
    checks = sorted({check for _, report in reports for check in report.checks()})
    header = ["thunder", "torch", "TE", "executor", "ranks", "source", *checks]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for source, report in reports:
        versions = report.environment.get("versions", {})
        for executor in report.executors():
            row = [
                versions.get("thunder") or "-",
                versions.get("torch") or "-",
                versions.get("transformer_engine") or "-",
                executor,
                f"{report.environment.get('world_size', '?')} {report.environment.get('backend', '?')}",
                source,
            ]
            row += [_cell(c) if (c := report.cells.get((check, executor))) else "" for check in checks]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
