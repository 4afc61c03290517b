"""The parity reporter: collects the test reports of a run into the parity report and the run's phases into
its timeline, prints the table at the end, then the verdict (GREEN or RED, why, where the JSON went), and writes the
JSON. Lives in the process that starts the run (the xdist controller, or a lone process)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from teparity.gate import schedule
from teparity.gate.controller import Controller
from teparity.report.evidence import excerpt
from teparity.gate.header import references_line, te_settings
from teparity.report.parity import (
    BOUNDED_PROPERTY,
    COVERING_PROPERTY,
    EVIDENCE_PROPERTY,
    EXPOSED_PROPERTY,
    KNOWN_PROPERTY,
    MODEL_PROPERTY,
    NEAR_MISS_PROPERTY,
    NUMBERS_PROPERTY,
    REFERENCE_PROPERTY,
    ROW_PROPERTY,
    ParityReport,
    TestOutcome,
)
from teparity.gate.settings import probed_environment
from teparity.report.table import json_note, terminal_table, wrapped
from teparity.gate.timeline import Timeline, process_started
from teparity.known.registry import extrapolated
from teparity.launch import rank_env
from teparity.stack import reasons

_XPASS_STRICT = "[XPASS(strict)] "


def _outcome(report: pytest.TestReport) -> TestOutcome | None:
    outcome = _bare_outcome(report)
    if outcome is None or not (served := dict(report.user_properties).get(REFERENCE_PROPERTY)):
        return outcome
    return dataclasses.replace(outcome, reference=served)


def _bare_outcome(report: pytest.TestReport) -> TestOutcome | None:
    properties = dict(report.user_properties)
    if report.skipped and hasattr(report, "wasxfail"):
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else report.wasxfail
        model = properties.get(MODEL_PROPERTY) or {}
        numbers = {key: value for key, value in model.items() if key not in ("entry", "modeled")} or None
        return TestOutcome(report.nodeid, "known", excerpt(message), known_defect=properties.get(KNOWN_PROPERTY),
                           exposed_by=properties.get(EXPOSED_PROPERTY), modeled=model.get("modeled"),
                           tensors_compared=model.get("tensors_compared"), bounded=properties.get(BOUNDED_PROPERTY),
                           numbers=numbers)
    if (report.failed and str(report.longrepr).startswith(_XPASS_STRICT)) or (report.passed and hasattr(report, "wasxfail")):
        reason = str(report.longrepr).removeprefix(_XPASS_STRICT) if report.failed else report.wasxfail
        return TestOutcome(report.nodeid, "XPASS", excerpt(reason), did_not_show=properties.get(COVERING_PROPERTY))
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return TestOutcome(report.nodeid, "skip", reason.removeprefix("Skipped: "))
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else report.longreprtext
        return TestOutcome(report.nodeid, "FAIL", excerpt(message), near_miss=properties.get(NEAR_MISS_PROPERTY))
    if report.when == "call":
        return TestOutcome(report.nodeid, "pass", properties.get(EVIDENCE_PROPERTY, ""), numbers=properties.get(NUMBERS_PROPERTY))
    return None


class ParityReporter:
    """Collects test reports into the parity report, and the run's phases into its timeline; lives in the
    xdist controller or a lone process."""

    def __init__(self, config: pytest.Config, controller: Controller) -> None:
        self.config, self.controller = config, controller
        self.report = ParityReport(environment={})
        self.timeline = Timeline(started=time.time())
        if (started := process_started()) is not None:
            self.timeline.mark("process_started", started)
        #: When the session finished (every plugin's session finish but the wrappers'), for both time lines.
        self.finished: float | None = None
        #: Every test that failed in any phase: a base excuses a run's exit status only where it excuses them all.
        self.failed: set[str] = set()
        #: The run judged against its base, once every test has reported (the session's end reads it three times).
        self._against_base: Any = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self) -> None:
        self.timeline.mark("session_started", time.time())  # after the fork server was chosen

    @pytest.hookimpl(optionalhook=True)  # xdist's hooks: absent under -p no:xdist
    def pytest_testnodeready(self) -> None:
        self.timeline.mark("workers_ready", time.time())

    @pytest.hookimpl(optionalhook=True)  # xdist's hooks: absent under -p no:xdist
    def pytest_xdist_node_collection_finished(self) -> None:
        self.timeline.mark("workers_collected", time.time())

    def pytest_collection_finish(self) -> None:
        self.timeline.mark("collected", time.time())  # a lone process (the xdist controller collects nothing)

    @pytest.hookimpl(optionalhook=True)  # xdist's hooks: absent under -p no:xdist
    def pytest_testnodedown(self) -> None:
        self.timeline.mark("workers_down", time.time())

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)
        node = getattr(report, "node", None)  # an xdist worker's report, in the controller
        self.timeline.record(report.nodeid, node.gateway.id if node is not None else "main", report.start, report.stop)
        tag = dict(report.user_properties).get(ROW_PROPERTY)
        if tag is not None and (outcome := _outcome(report)) is not None:
            self.report.record(tag["check"], tag["executor"], outcome)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        """The table and the time line, then the verdict as the report's last line; for a run that tested something
        or stopped before it could (a run of no check, the harness's, has no verdict of the gate's)."""
        self._finish()
        if not self.report.cells and not self.controller.stopped:
            return
        self._complete(exitstatus)
        terminalreporter.write_sep("=", "teparity parity report")
        lines = [*terminal_table(self.report), *wrapped(f"teparity time: {self.timeline.summary(self.finished)}")] if self.report.cells else []
        if used := self.report.references():
            lines += wrapped(f"teparity {used}")
        lines += wrapped(f"teparity: {self.report.verdict()}; {json_note(self.controller.settings.report)}")
        lines += [said for line in (self.report.against_base or {}).get("lines", []) for said in wrapped(f"teparity: {line}")]
        for line in lines:
            terminalreporter.write_line(line)

    def _finish(self) -> float:
        """The session's end: the terminal summary (after every plugin's session finish, xdist's teardown of
        its workers included), or the end of this wrapper where no terminal reporter runs."""
        if self.finished is None:
            self.finished = time.time()
            self.timeline.mark("session_finished", self.finished)
        return self.finished

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Any:
        """Around every other plugin's session finish, so that the report's timeline holds them all; against a base,
        the run's exit status is its change's (``against_base``)."""
        session.exitstatus = self._judged(exitstatus)
        try:
            return (yield)
        finally:
            self._write_report(exitstatus)

    def _write_report(self, exitstatus: int) -> None:
        from teparity.launch.torchrun import torchrun_world

        finished = self._finish()
        schedule.remember_durations(self.config, {span.nodeid: span.duration for span in self.timeline.spans.values()})
        # Every torchrun rank judged the same all-gathered evidence: rank 0 alone writes the report.
        joined = torchrun_world()
        if (path := self.controller.settings.report) and (joined is None or joined[0] == 0):
            self._complete(exitstatus)
            self.timeline.mark("sessionfinish_done", time.time())
            self.report.timeline = self.timeline.to_json(finished)
            self.report.write(path)

    def _judged(self, exitstatus: int) -> int:
        """The run's exit status; with ``--teparity-base``, its change's (``teparity.report.relative.against_base``): 0
        where pytest's 1 came only from tests the base excuses (already red there, or fixed by this change)."""
        from teparity.report.relative import against_base
        from teparity.report.parity import read_report

        if (base := self.controller.settings.base) is None or not self.report.cells:
            return int(exitstatus)
        if self._against_base is None:
            if not self.report.environment:  # the base is compared with this run's versions and options, never with none
                self.report.environment = self._environment_section()
            self._against_base = against_base(self.report, read_report(base))
        verdict = self._against_base
        self.report.against_base = {**verdict.to_json(), "base": base, "lines": verdict.lines()}
        return 0 if exitstatus == 1 and verdict.green and self.failed <= verdict.excused() else int(exitstatus)

    def _complete(self, exitstatus: int) -> None:
        """The report's run-wide parts: its exit status (2, interrupted, e.g. by a time limit: only the tests that
        finished are in it; against a base, its change's), why it stopped before testing, if it did, and the
        environment."""
        self.report.environment = self._environment_section()
        self.report.exitstatus = self._judged(exitstatus)
        self.report.stopped = self.controller.stopped

    def _environment_section(self) -> dict[str, Any]:
        from teparity.stack.provenance import teparity_commit

        env = probed_environment()
        settings = self.controller.settings
        ranks, not_forked = settings.ranks
        return {
            **env.to_json(),
            "teparity_commit": teparity_commit(),
            "world_size": settings.world_size,
            "backend": settings.backend,
            "harness_deadline_s": settings.timeout,
            "ranks": ranks,
            "ranks_not_forked": not_forked,
            "launch": self.controller.launch_label(),
            "sides": settings.sides,
            "injected": list(settings.inject),
            "fp8": reasons.no_fp8(env) or "yes",
            "te_settings": te_settings(),
            "rank_environment": rank_env.in_force(self.controller.rank_env_set),
            "references": references_line(settings),
            "known_defects_extrapolated": extrapolated(env.versions),
        }
