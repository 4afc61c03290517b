"""Verdicts relative to another run: a change's verdict against its base (``--teparity-base``: a PR against the
report of the build it branched from), and the diff of two runs' verdicts (``python -m teparity diff``).

A change is judged by what it did: a test red here and red the same way on the base is already red there (listed,
not this change's red); an XPASS here of a test known on the base is a fix by this change (green, naming the entries to
retire); any other red is the change's. Where the base ran other versions or options, the verdict says so first, and a
test whose outcome another version explains (a known defect whose range holds on one run's versions alone) is neither
the change's fix nor its regression. Two runs are compared test by test, by the same rules: ``diff`` calls regressed
exactly what the gate calls red by the change; their evidence's words are never a difference, its numbers are on
request."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from teparity.report.parity import ParityReport, TestOutcome

RED = ("FAIL", "XPASS")
#: What must match for two runs' tests to be compared as the same tests: the report environment's keys that change
#: what a test does (its versions, the judge, the ranks, the injected mutations).
SAME_RUN_KEYS = ("versions", "teparity_commit", "world_size", "backend", "injected", "te_settings")


def outcomes(report: ParityReport) -> dict[str, TestOutcome]:
    """Each test of the report by node id."""
    return {test.nodeid: test for cell in report.cells.values() for test in cell.tests}


def failure_kind(test: TestOutcome) -> str:
    """How a red test is red, without its numbers: the outcome, the failure's type (the evidence before its first
    colon) and the entry a near miss matched."""
    head = test.evidence.split(":", 1)[0] if ":" in test.evidence[:200] else ""
    return " ".join(filter(None, (test.outcome, re.sub(r"\d+", "N", head), test.near_miss)))


def run_differences(here: ParityReport, base: ParityReport) -> list[str]:
    """How the base's run differs from this one's (versions, teparity commit, options), in words."""
    said = []
    for key in SAME_RUN_KEYS:
        ours, theirs = here.environment.get(key), base.environment.get(key)
        if key == "versions":
            ours, theirs = _versions(ours), _versions(theirs)
        if ours != theirs:
            said.append(f"{key}: {theirs!r} on the base, {ours!r} here")
    return said


def _versions(versions: dict[str, Any] | None) -> dict[str, Any]:
    """The versions as compared (a placed source build's words aside: its read-as version is compared)."""
    return {key: value for key, value in (versions or {}).items() if key != "sources"}


#: The versions that are not the change's own: a PR changes thunder, so its thunder differs from its base's by design.
NOT_THE_CHANGE = ("torch", "transformer_engine")


def differs_first(here: ParityReport, base: ParityReport) -> str:
    """What the verdict says before anything else where the base's run is not this one's beyond the change itself:
    which torch or TE and which of the other keys differ, in a few words ("" where none do)."""
    ours, theirs = _versions(here.environment.get("versions")), _versions(base.environment.get("versions"))
    said = [f"{name} {theirs.get(name) or 'absent'} there, {ours.get(name) or 'absent'} here"
            for name in NOT_THE_CHANGE if ours.get(name) != theirs.get(name)]
    said += [key for key in SAME_RUN_KEYS[1:] if here.environment.get(key) != base.environment.get(key)]
    return f"THE BASE RAN OTHERWISE ({'; '.join(said)}): " if said else ""


def version_explained(before: TestOutcome, after: TestOutcome, before_report: ParityReport,
                      after_report: ParityReport) -> str | None:
    """The registry entry that explains a change of outcome by the runs' torch or TE alone (``NOT_THE_CHANGE``): known on
    one run by an entry whose range leaves the other run's torch and TE out, at the known run's own thunder; None where
    none does (a thunder of its own is the change)."""
    from teparity.known.registry import BY_ID
    from teparity.stack.versions import Versions

    versions = [_versions(report.environment.get("versions")) for report in (before_report, after_report)]
    if all(versions[0].get(name) == versions[1].get(name) for name in NOT_THE_CHANGE):
        return None
    for known, own, other in ((before, versions[0], versions[1]), (after, versions[1], versions[0])):
        entry = BY_ID.get(known.known_defect or "") if known.outcome == "known" else None
        elsewhere = Versions(torch=other.get("torch"), thunder=own.get("thunder"), transformer_engine=other.get("transformer_engine"))
        if entry is not None and not entry.holds_for_versions(elsewhere):
            return entry.id
    return None


@dataclasses.dataclass
class ChangeVerdict:
    """This run judged against its base: what is already red there, what this change fixed, and what it broke."""

    #: Red here and red the same way on the base.
    already_red: list[TestOutcome]
    #: XPASS here of a test known on the base: (the test, the entries it retires).
    fixed: list[tuple[TestOutcome, list[str]]]
    #: Red here, and not excused by the base: this change's.
    red: list[TestOutcome]
    #: How the base's run differs from this one (compared only where the tests are the same).
    run_differs: list[str]
    #: Tests in both runs.
    compared: int
    #: What the verdict says first where the base ran other versions or options (``differs_first``).
    base_differs: str = ""
    #: Red here where the other versions explain it: (the test, the entry whose range holds on one run alone).
    explained: list[tuple[TestOutcome, str]] = dataclasses.field(default_factory=list)

    @property
    def green(self) -> bool:
        return not self.red

    def excused(self) -> set[str]:
        """The node ids red here that the base excuses (already red there, or fixed by this change)."""
        return {t.nodeid for t in self.already_red} | {t.nodeid for t, _ in self.fixed} | {t.nodeid for t, _ in self.explained}

    def summary(self) -> str:
        """One line: what this change did."""
        parts = [f"{len(self.red)} red by this change", f"{len(self.already_red)} already red on the base",
                 f"{len(self.fixed)} fixed by this change"]
        if self.explained:
            parts.append(f"{len(self.explained)} explained by the other versions")
        retire = sorted({entry for _, entries in self.fixed for entry in entries})
        return (self.base_differs + ", ".join(parts) + (f" (retire {', '.join(retire)})" if retire else "")
                + f"; {self.compared} tests compared")

    def lines(self) -> list[str]:
        """Every test it names, with why, and how the base's run differs."""
        said = [f"red by this change: {t.outcome} {t.nodeid}" for t in self.red]
        said += [f"already red on the base: {t.outcome} {t.nodeid}" for t in self.already_red]
        said += [f"fixed by this change: {t.nodeid} (retire {', '.join(entries)})" for t, entries in self.fixed]
        said += [f"explained by the other versions: {t.outcome} {t.nodeid} ({entry}'s range)" for t, entry in self.explained]
        return [f"the base's run differs: {difference}" for difference in self.run_differs] + said

    def to_json(self) -> dict[str, Any]:
        return {"green": self.green, "summary": self.summary(), "red": [t.nodeid for t in self.red],
                "already_red": [t.nodeid for t in self.already_red],
                "fixed": [{"nodeid": t.nodeid, "retire": entries} for t, entries in self.fixed],
                "explained": [{"nodeid": t.nodeid, "entry": entry} for t, entry in self.explained],
                "run_differs": self.run_differs, "compared": self.compared}


def against_base(here: ParityReport, base: ParityReport) -> ChangeVerdict:
    """This run's red tests sorted by what the base says of them."""
    ours, theirs = outcomes(here), outcomes(base)
    already, fixed, red, explained = [], [], [], []
    for nodeid, test in sorted(ours.items()):
        if test.outcome not in RED:
            continue
        before = theirs.get(nodeid)
        if before is not None and before.outcome in RED and failure_kind(before) == failure_kind(test):
            already.append(test)
        elif test.outcome == "XPASS" and before is not None and before.outcome == "known":
            fixed.append((test, test.did_not_show or [before.known_defect or "?"]))
        elif before is not None and (entry := version_explained(before, test, base, here)):
            explained.append((test, entry))
        else:
            red.append(test)
    return ChangeVerdict(already, fixed, red, run_differences(here, base), len(ours.keys() & theirs.keys()),
                         differs_first(here, base), explained)


@dataclasses.dataclass
class Diff:
    """Two runs test by test: regressed (red after, not red before; or a pass lost), fixed (the reverse), other
    changes of outcome, new and removed tests, and (``numbers``) tests of one outcome whose numbers moved."""

    regressed: list[tuple[str, str, str]]
    fixed: list[tuple[str, str, str]]
    changed: list[tuple[str, str, str]]
    new: list[tuple[str, str]]
    removed: list[tuple[str, str]]
    moved: list[tuple[str, dict[str, tuple[float | None, float | None]]]]
    #: Changes of outcome that the runs' other versions explain: (node, before, after, the entry).
    explained: list[tuple[str, str, str, str]] = dataclasses.field(default_factory=list)
    #: What differs between the runs, said first (``differs_first``).
    runs_differ: str = ""

    def lines(self, *, numbers: bool = False) -> list[str]:
        said = [self.runs_differ.removesuffix(": ")] if self.runs_differ else []
        said += [f"regressed: {node} ({before} -> {after})" for node, before, after in self.regressed]
        said += [f"fixed: {node} ({before} -> {after})" for node, before, after in self.fixed]
        said += [f"changed: {node} ({before} -> {after})" for node, before, after in self.changed]
        said += [f"explained by the other versions: {node} ({before} -> {after}, {entry}'s range)"
                 for node, before, after, entry in self.explained]
        said += [f"new: {node} ({after})" for node, after in self.new]
        said += [f"removed: {node} (was {before})" for node, before in self.removed]
        if numbers:
            said += [f"numbers moved: {node}: " + ", ".join(f"{kind} max |d| {a} -> {b}" for kind, (a, b) in sorted(kinds.items()))
                     for node, kinds in self.moved]
        return said


def diff(before: ParityReport, after: ParityReport) -> Diff:
    """``before`` and ``after`` test by test, by the gate's rules (``against_base``, ``after`` against ``before``):
    regressed is what the gate calls red by the change (a new red test among it), fixed what it excuses as fixed or
    was red and is no longer, explained what the other versions explain; any other change of outcome is changed."""
    old, new = outcomes(before), outcomes(after)
    verdict = against_base(after, before)
    red, fixes = {t.nodeid for t in verdict.red}, {t.nodeid for t, _ in verdict.fixed}
    regressed, fixed, changed, moved, explained = [], [], [], [], []
    for node in sorted(old.keys() & new.keys()):
        a, b = old[node], new[node]
        step = (node, a.outcome, b.outcome)
        if node in red:
            regressed.append(step if a.outcome != b.outcome else (node, failure_kind(a), failure_kind(b)))
        elif a.outcome == b.outcome:
            if kinds := _numbers_moved(a, b):
                moved.append((node, kinds))
        elif entry := version_explained(a, b, before, after):
            explained.append((*step, entry))
        elif node in fixes or a.outcome in RED:
            fixed.append(step)
        else:
            changed.append(step)
    # A new test that is red is a regression too: what it found is new.
    new_tests = [(node, new[node].outcome) for node in sorted(new.keys() - old.keys())]
    regressed += [(node, "absent", outcome) for node, outcome in new_tests if outcome in RED]
    removed = [(node, old[node].outcome) for node in sorted(old.keys() - new.keys())]
    return Diff(regressed, fixed, changed, new_tests, removed, moved, explained, differs_first(after, before))


def _numbers_moved(a: TestOutcome, b: TestOutcome) -> dict[str, tuple[float | None, float | None]]:
    """Per kind of tensor, the largest difference before and after, where it moved."""
    before, after = (a.numbers or {}).get("max_abs", {}), (b.numbers or {}).get("max_abs", {})
    return {kind: (before.get(kind), after.get(kind)) for kind in sorted(before.keys() | after.keys())
            if before.get(kind) != after.get(kind)}
