"""Verdicts relative to another run (``teparity.report.relative``): a change against its base (``--teparity-base``) and
the diff of two runs (``python -m teparity diff``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teparity.report.relative import against_base, diff
from teparity.report.parity import ParityReport, TestOutcome

ENV = {"versions": {"torch": "2.11.0", "thunder": "0.2.6", "transformer_engine": "2.9.0"}, "teparity_commit": "abc",
       "world_size": 2, "backend": "gloo", "injected": [], "te_settings": {}}


def _report(*tests: TestOutcome, env: dict | None = None) -> ParityReport:
    report = ParityReport(environment=dict(env or ENV))
    for test in tests:
        report.record("check", "functional", test)
    return report


def _fail(node: str, message: str = "PartedFromEager: output max |d| 0.5 at step 1") -> TestOutcome:
    return TestOutcome(node, "FAIL", message)


def test_a_test_red_the_same_way_on_the_base_is_already_red_there_whatever_its_numbers() -> None:
    verdict = against_base(_report(_fail("a", "PartedFromEager: output max |d| 0.7 at step 2")), _report(_fail("a")))
    assert verdict.green and [t.nodeid for t in verdict.already_red] == ["a"] and not verdict.red
    assert "0 red by this change, 1 already red on the base, 0 fixed by this change" in verdict.summary()


def test_a_test_red_another_way_than_on_the_base_or_red_only_here_is_the_changes() -> None:
    here = _report(_fail("a", "SilentFallback: TE claimed 0 of 2 linears"), _fail("b"), _fail("new"))
    base = _report(_fail("a"), TestOutcome("b", "pass", ""))
    verdict = against_base(here, base)
    assert not verdict.green and [t.nodeid for t in verdict.red] == ["a", "b", "new"]


def test_an_xpass_of_a_test_known_on_the_base_is_fixed_by_the_change_and_names_the_entry_to_retire() -> None:
    here = _report(TestOutcome("k", "XPASS", "did not show", did_not_show=["some-defect"]))
    base = _report(TestOutcome("k", "known", "m", known_defect="some-defect"))
    verdict = against_base(here, base)
    assert verdict.green and verdict.fixed[0][1] == ["some-defect"] and verdict.excused() == {"k"}
    assert "(retire some-defect)" in verdict.summary()
    assert not against_base(here, _report(TestOutcome("k", "pass", ""))).green, "an XPASS of a test that passed there"


def test_a_base_of_other_versions_is_said_plainly_and_compared_where_the_tests_are_the_same() -> None:
    other = {**ENV, "versions": {**ENV["versions"], "thunder": "0.2.5"}, "teparity_commit": "def"}
    verdict = against_base(_report(_fail("a"), TestOutcome("b", "pass", "")), _report(_fail("a"), env=other))
    assert verdict.compared == 1 and verdict.green
    assert any("versions" in said for said in verdict.run_differs) and any("teparity_commit" in said for said in verdict.run_differs)
    assert any(line.startswith("the base's run differs: versions") for line in verdict.lines())


def test_the_diff_sorts_tests_by_what_changed_and_words_alone_are_no_difference() -> None:
    before = _report(TestOutcome("same", "pass", "old words", numbers={"max_abs": {"output": 0.0}}),
                     TestOutcome("worse", "pass", ""), TestOutcome("better", "FAIL", "X: y"),
                     TestOutcome("gone", "skip", "why"), TestOutcome("moved", "pass", "", numbers={"max_abs": {"grad": 0.1}}))
    after = _report(TestOutcome("same", "pass", "new words", numbers={"max_abs": {"output": 0.0}}),
                    _fail("worse"), TestOutcome("better", "pass", ""), TestOutcome("fresh", "skip", "why"),
                    _fail("fresh-red"), TestOutcome("moved", "pass", "", numbers={"max_abs": {"grad": 0.2}}))
    found = diff(before, after)
    assert [step[0] for step in found.regressed] == ["worse", "fresh-red"]
    assert [step[0] for step in found.fixed] == ["better"]
    assert found.new == [("fresh", "skip"), ("fresh-red", "FAIL")] and found.removed == [("gone", "skip")]
    assert found.moved == [("moved", {"grad": (0.1, 0.2)})] and not found.changed
    assert not any("same" in line for line in found.lines(numbers=True))
    assert "numbers moved: moved: grad max |d| 0.1 -> 0.2" in found.lines(numbers=True)


def test_diff_and_the_gate_agree_a_fix_is_a_fix_and_a_known_test_is_no_regression() -> None:
    """A test known on the base that XPASSes now is fixed in both (naming the entry to retire); a pass that became known
    or skipped is a change the gate calls green, so diff does not call it regressed; diff regresses exactly the gate's
    red by this change."""
    before = _report(TestOutcome("k", "known", "m", known_defect="some-defect"), TestOutcome("p", "pass", ""),
                     TestOutcome("s", "pass", ""), _fail("r"), _fail("kind"))
    after = _report(TestOutcome("k", "XPASS", "did not show", did_not_show=["some-defect"]),
                    TestOutcome("p", "known", "m", known_defect="some-defect"), TestOutcome("s", "skip", "why"),
                    _fail("r"), _fail("kind", "SilentFallback: TE claimed 0 of 2 linears"))
    found, verdict = diff(before, after), against_base(after, before)
    assert [step[0] for step in found.fixed] == ["k"] and [t.nodeid for t, _ in verdict.fixed] == ["k"]
    assert [step[0] for step in found.regressed] == [t.nodeid for t in verdict.red] == ["kind"]
    assert [step[0] for step in found.changed] == ["p", "s"] and not found.explained


TORCH_2_12 = {**ENV, "versions": {**ENV["versions"], "torch": "2.12.1"}}
THUNDERFX = "tests/trace/test_thunderfx.py::test_thunderfx_matches_torch[1proc]"


def test_a_base_of_other_versions_is_said_first_and_what_they_explain_is_not_the_changes() -> None:
    """thunderfx is known on torch 2.12 (its entry's torch range), not on 2.11: a base run on torch 2.12.1 and a change
    run on 2.11.0 differ there by torch alone. The verdict and diff say the base ran otherwise before anything else,
    and neither calls that test the change's fix."""
    entry = "thunderfx-cannot-interpret-torch-2.12-fx-codegen"
    base = _report(TestOutcome(THUNDERFX, "known", "m", known_defect=entry), env=TORCH_2_12)
    here = _report(TestOutcome(THUNDERFX, "pass", ""))
    verdict = against_base(here, base)
    assert verdict.summary().startswith("THE BASE RAN OTHERWISE (torch 2.12.1 there, 2.11.0 here): ")
    pr = {**ENV, "versions": {**ENV["versions"], "thunder": "0.2.7.dev20260204"}}
    assert not against_base(_report(TestOutcome(THUNDERFX, "pass", ""), env=pr), _report(TestOutcome(THUNDERFX, "pass", ""))
                            ).base_differs, "a PR's own thunder is the change, not a base that ran otherwise"
    assert verdict.lines()[0] == "the base's run differs: versions: " + repr(TORCH_2_12["versions"]) + " on the base, " \
        + repr(ENV["versions"]) + " here"
    found = diff(base, here)
    assert not found.fixed and not found.regressed and found.explained == [(THUNDERFX, "known", "pass", entry)]
    assert found.lines()[0] == "THE BASE RAN OTHERWISE (torch 2.12.1 there, 2.11.0 here)"
    back = diff(here, base)
    assert not back.regressed and back.explained == [(THUNDERFX, "pass", "known", entry)]
    same = diff(_report(TestOutcome(THUNDERFX, "known", "m", known_defect=entry)), here)
    assert not same.explained and same.changed == [(THUNDERFX, "known", "pass")], "one version: nothing to explain it"


def test_diff_exits_1_on_a_regression_alone(tmp_path: Path) -> None:
    paths = {}
    for name, report in (("base", _report(TestOutcome("a", "pass", "x"))), ("words", _report(TestOutcome("a", "pass", "y"))),
                         ("new", _report(TestOutcome("a", "pass", ""), TestOutcome("b", "skip", "why"))),
                         ("red", _report(_fail("a")))):
        report.write(paths.setdefault(name, tmp_path / f"{name}.json"))

    def run(after: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "teparity", "diff", str(paths["base"]), str(paths[after])],
                              capture_output=True, text=True, timeout=120, check=False)

    assert run("words").returncode == 0 and "0 regressed, 0 fixed, 0 changed, 0 explained by the other versions, 0 new, 0 removed" in run("words").stdout
    assert run("new").returncode == 0 and "1 new" in run("new").stdout
    red = run("red")
    assert red.returncode == 1 and "regressed: a (pass -> FAIL)" in red.stdout


GATE = """
import os
import pytest


@pytest.mark.check("alpha")
def test_alpha():
    assert not os.environ.get("ALPHA_FAILS"), "alpha differs"


@pytest.mark.check("beta")
def test_beta():
    assert not os.environ.get("BETA_FAILS"), "beta differs"
"""


def test_a_run_against_its_base_is_green_where_only_the_base_is_red_and_red_where_the_change_is(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_gate=GATE)
    monkeypatch.setenv("ALPHA_FAILS", "1")
    pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-report", "base.json")
    already = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-report",
                                            "here.json", "--teparity-base", "base.json")
    assert already.ret == 0, already.stdout.str()[-3000:]
    already.stdout.fnmatch_lines(["*teparity: GREEN (exit 0)*against the base base.json: 0 red by this change, 1 already red*",
                                  "*already red on the base: FAIL test_gate.py::test_alpha*"])
    data = json.loads((pytester.path / "here.json").read_text())
    assert data["exitstatus"] == 0 and data["against_base"]["already_red"] == ["test_gate.py::test_alpha"]
    # The same stack, the same options: nothing differs, and nothing says it does (terminal and JSON alike).
    assert data["against_base"]["run_differs"] == [] and "the base's run differs" not in already.stdout.str()
    assert "THE BASE RAN OTHERWISE" not in already.stdout.str()
    monkeypatch.setenv("BETA_FAILS", "1")
    changed = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-base", "base.json")
    assert changed.ret == 1
    changed.stdout.fnmatch_lines(["*teparity: RED (exit 1)*1 red by this change*", "*red by this change: FAIL test_gate.py::test_beta*"])


def test_a_base_that_is_no_report_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gate=GATE)
    (pytester.path / "nonsense.json").write_text("{}")
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "--teparity-base", "nonsense.json")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--teparity-base*nonsense.json: not a teparity parity report*"])
