"""The parity report: per check and executor, the outcome and its evidence; a terminal table and JSON.

Rows are checks (``@pytest.mark.check(NAME)``), columns are TE executors, cells aggregate every test
of that check and executor, the first of these that any test had: FAIL (a new failure; a near miss
names the registered defect it matches outside that entry's version ranges), XPASS (a
registered known defect did not show: fixed upstream?), known (a registered known defect, by id), pass,
skip (with the reason).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

from teparity.reportfile import read_json
from teparity.stack import reasons
from teparity.stack.environment import Environment
from teparity.stack.executors import EXECUTOR_KINDS

Outcome = Literal["pass", "FAIL", "XPASS", "known", "skip"]
#: Cell precedence: what a reader must see first.
PRECEDENCE: tuple[Outcome, ...] = ("FAIL", "XPASS", "known", "pass", "skip")
NO_EXECUTOR = "-"
SCHEMA = "teparity.parity-report/1"
#: The ``user_properties`` keys that carry a test's part of the report across xdist: its row (check and
#: executor), the one-line evidence of a pass, the entry a failure matched, and the entry a failure matched
#: outside its ranges (a near miss).
ROW_PROPERTY = "teparity"
EVIDENCE_PROPERTY = "teparity_evidence"
KNOWN_PROPERTY = "teparity_known_defect"
NEAR_MISS_PROPERTY = "teparity_near_miss"
#: The registry entries that cover a test on the stack (at collection): an XPASS names them as data.
COVERING_PROPERTY = "teparity_covering"
#: The entries whose model's run exposed a thunder raise that the reference's own failure hid.
EXPOSED_PROPERTY = "teparity_exposed_by"
#: How a known test was held beyond its signature: against the entry's model (``{"modeled": "pass",
#: "tensors_compared": N, ...}``), or by a bounded signature (``True``).
MODEL_PROPERTY = "teparity_model"
#: What a passing comparison compared: tensors, the largest difference and the rule of each quantity.
NUMBERS_PROPERTY = "teparity_numbers"
BOUNDED_PROPERTY = "teparity_bounded"
#: How each reference side of a test was had (``teparity.gate.references.Served``): computed, or reused from a run.
REFERENCE_PROPERTY = "teparity_reference"
#: How a reference names the run that computed it: the thunder build beside it first (``built_beside``).
REFERENCE_RUN = "thunder {thunder}, teparity {commit}, {started} on {host} (run {run})"


def built_beside(run: str) -> str | None:
    """The thunder build beside which the run named ``run`` (``REFERENCE_RUN``) computed a reference."""
    build = run.split(",", 1)[0].removeprefix("thunder ")
    return None if build == "absent" else build


@dataclasses.dataclass(frozen=True)
class TestOutcome:
    nodeid: str
    outcome: Outcome
    #: For a pass: what the test recorded as evidence; for a failure or a known defect: its message's excerpt
    #: (``teparity.report.evidence``); for an XPASS: the entries' reasons; for a skip: the reason.
    evidence: str
    #: The registry entry (``teparity.known.registry``) a "known" outcome matched.
    known_defect: str | None = None
    #: The entries whose model a "known" outcome's thunder side was judged against where that exposed the raise which
    #: ``known_defect``'s signature matched (the reference's own failure hid it): their defects are there too.
    exposed_by: list[str] | None = None
    #: The registry entries that covered an "XPASS" test: none of them showed (fixed upstream? retire them).
    did_not_show: list[str] | None = None
    #: The entry whose signature a "FAIL" matched outside that entry's version ranges (a near miss).
    near_miss: str | None = None
    #: A "known" outcome held against the entry's model of the defect: "pass" (thunder matched the model under the
    #: full rules), with the tensors that comparison compared.
    modeled: str | None = None
    tensors_compared: int | None = None
    #: A "known" outcome whose entry has no model (a side raised): its signature requires that nothing else differed
    #: and nothing else raised.
    bounded: bool | None = None
    #: A pass's comparison (or a known outcome's, against the model): tensors compared, the largest difference
    #: (``max_abs``, ``max_ulps``) and the rule (``allowed``) of each quantity.
    numbers: dict[str, Any] | None = None
    #: Each reference side the test compared with: ``{"call", "source": "computed" | "reused", "run"}``.
    reference: list[dict[str, str]] | None = None

    def held_by(self) -> str:
        """How a known outcome was held beyond its signature, in words ("" where it was not)."""
        if self.modeled:
            return f"modeled: {self.modeled}"
        return "bounded" if self.bounded else ""


@dataclasses.dataclass
class Cell:
    tests: list[TestOutcome] = dataclasses.field(default_factory=list)

    @property
    def outcome(self) -> Outcome:
        outcomes = {t.outcome for t in self.tests}
        return next(outcome for outcome in PRECEDENCE if outcome in outcomes or outcome == "skip")

    def known_defects(self) -> list[str]:
        return sorted({t.known_defect or "unregistered" for t in self.tests if t.outcome == "known"})

    def short(self) -> str:
        outcome = self.outcome
        if outcome == "skip":
            return f"skip ({self.tests[0].evidence})"
        if outcome == "known":
            held = sorted({t.held_by() for t in self.tests if t.outcome == "known"} - {""})
            return f"known ({', '.join(self.known_defects())})" + (f"; {', '.join(held)}" if held else "")
        if outcome in ("FAIL", "XPASS"):
            count = sum(1 for t in self.tests if t.outcome == outcome)
            near = sorted({t.near_miss for t in self.tests if t.outcome == "FAIL" and t.near_miss})
            return f"{outcome} ({count}/{len(self.tests)}" + (f"; matches {', '.join(near)} outside its range)" if near else ")")
        return f"pass ({len(self.tests)})" if len(self.tests) > 1 else "pass"


@dataclasses.dataclass
class ParityReport:
    environment: dict[str, Any]
    cells: dict[tuple[str, str], Cell] = dataclasses.field(default_factory=dict)
    #: pytest's exit status (0 green; 1 a test failed; 2 interrupted: only finished tests are here).
    exitstatus: int | None = None
    #: Where the run's time went (``teparity.gate.timeline.Timeline.to_json``); not part of any verdict.
    timeline: dict[str, Any] | None = None
    #: Why the run stopped before it tested anything (no thunder in its Python), or None.
    stopped: str | None = None
    #: The change judged against its base (``--teparity-base``): ``teparity.report.relative.ChangeVerdict.to_json`` and
    #: the base's path, or None.
    against_base: dict[str, Any] | None = None

    def record(self, check: str, executor: str | None, test: TestOutcome) -> None:
        self.cells.setdefault((check, executor or NO_EXECUTOR), Cell()).tests.append(test)

    def checks(self) -> list[str]:
        return sorted({check for check, _ in self.cells})

    def executors(self) -> list[str]:
        """Columns: thunder's TE executors in their usual order, then any others, then executor-free checks."""
        order = {kind: i for i, kind in enumerate(EXECUTOR_KINDS)}
        return sorted({e for _, e in self.cells}, key=lambda e: (e == NO_EXECUTOR, order.get(e, len(order)), e))

    def count(self, outcome: Outcome) -> int:
        """The tests (not cells) with this outcome."""
        return sum(1 for cell in self.cells.values() for test in cell.tests if test.outcome == outcome)

    def verdict(self, exit_status: int | None = None) -> str:
        """GREEN or RED, and why: the exit status (``exit_status`` in place of the report's), the FAIL and XPASS tests,
        a system under test that does not import, a run that stopped before it tested (the terminal report's last
        line, the job summary's heading)."""
        status = self.exitstatus if exit_status is None else exit_status
        counts = f"{self.count('FAIL')} FAIL, {self.count('XPASS')} XPASS"
        if self.against_base is not None:
            counts += f"; against the base {self.against_base['base']}: {self.against_base['summary']}"
        if status == 0:
            versions = self.environment.get("versions")
            absent = f" (no lightning-thunder: {reasons.ALLOW_NO_THUNDER})" if versions and versions.get("thunder") is None else ""
            return f"GREEN (exit 0): {counts}; {self.count('pass')} pass, {self.count('known')} known, {self.count('skip')} skip{absent}"
        why = [f"the gate stopped before it tested: {self.stopped}"] if self.stopped else [counts]
        if broken := self._broken():
            why.append(f"the system under test does not import or is an unsupported pair: {broken}")
        elif not self.stopped and not self.count("FAIL") and not self.count("XPASS"):
            why.append("a failure outside the parity table (pytest's own summary names it)")
        return red(status, "; ".join(why))

    def references(self) -> str | None:
        """How the run's reference sides were had, in words; None where no test compared with one."""
        served = [s for cell in self.cells.values() for t in cell.tests for s in t.reference or []]
        if not served:
            return None
        thunder = (self.environment.get("versions") or {}).get("thunder")
        reused = [s for s in served if s["source"] == "reused"]
        beside = sum(built_beside(s["run"]) != thunder for s in reused)
        return (f"references: {len(served) - len(reused)} computed, {len(reused)} reused ({beside} computed beside "
                "another thunder build)")

    def _broken(self) -> str | None:
        """Why every gate test failed on this stack (``reasons.import_failure``, ``unsupported_pair``), or None."""
        try:
            env = Environment.from_json(self.environment)
        except (KeyError, TypeError):  # a report without the probe's environment (a summary of a stopped run)
            return None
        return reasons.import_failure(env) or reasons.unsupported_pair(env)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "exitstatus": self.exitstatus,
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
            **({"timeline": self.timeline} if self.timeline is not None else {}),
            **({"stopped": self.stopped} if self.stopped is not None else {}),
            **({"against_base": self.against_base} if self.against_base is not None else {}),
        }

    def write(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ParityReport:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a teparity parity report (schema {data.get('schema')!r}, expected {SCHEMA!r})")
        environment = data["environment"]
        report = cls(environment=environment, exitstatus=data.get("exitstatus", environment.get("pytest_exit_status")),
                     timeline=data.get("timeline"), stopped=data.get("stopped"), against_base=data.get("against_base"))
        for result in data["results"]:
            for test in result["tests"]:
                # Reports before the registry called a known defect "xfail".
                outcome = "known" if test["outcome"] == "xfail" else test["outcome"]
                report.record(result["check"], result["executor"], TestOutcome(**{**test, "outcome": outcome}))
        return report


def red(status: int | None, why: str) -> str:
    """A red verdict: the gate's exit status, with its meaning where it says more than "a test failed" (None: the
    gate did not run), and why."""
    meaning = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}.get(status or 0)
    said = "the gate did not run" if status is None else f"exit {status}" + (f", {meaning}" if meaning else "")
    return f"RED ({said}): {why}"


class NotAReport(Exception):
    """A file the command was given is not a teparity parity report; the message says why, in one line."""


def read_report(path: str | Path) -> ParityReport:
    """The parity report in ``path`` (``.json``, or ``.json.gz``), or ``NotAReport`` saying why not (missing, unreadable,
    not JSON, another file)."""
    try:
        data = read_json(path)
    except (OSError, EOFError) as error:  # gzip's BadGzipFile and a cut stream too
        raise NotAReport(f"cannot read it: {getattr(error, 'strerror', None) or error}") from None
    except json.JSONDecodeError as error:
        raise NotAReport(f"not a teparity parity report (not JSON: {error.msg}: line {error.lineno} column {error.colno})") from None
    except ValueError as error:  # not text
        raise NotAReport(f"not a teparity parity report (not JSON: {error})") from None
    try:
        return ParityReport.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        said = f"no {error}" if isinstance(error, KeyError) else str(error).removeprefix("not a teparity parity report (")
        raise NotAReport(f"not a teparity parity report ({said.removesuffix(')')})") from None
