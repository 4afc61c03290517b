"""The parity report: cells aggregate outcomes, and a real -n 2 run writes them, with evidence, as JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from teparity.reportfile import read_json
from teparity.report.parity import ParityReport, TestOutcome
from teparity.report.table import CONTINUED_INDENT, terminal_table, unwrapped
from harness import REPO



def test_a_failure_dominates_a_cell_and_a_skip_keeps_its_reason() -> None:
    report = ParityReport(environment={})
    report.record("c1", "legacy", TestOutcome("t1", "pass", "ok"))
    report.record("c1", "legacy", TestOutcome("t2", "FAIL", "boom"))
    report.record("c1", "functional", TestOutcome("t3", "skip", "no functional executor"))
    report.record("c2", "legacy", TestOutcome("t4", "pass", "ok"))
    report.record("c2", "legacy", TestOutcome("t5", "skip", "x"))
    assert report.cells[("c1", "legacy")].outcome == "FAIL"
    assert report.cells[("c1", "functional")].short() == "skip (no functional executor)"
    assert report.cells[("c2", "legacy")].outcome == "pass"
    table = "\n".join(terminal_table(report))
    assert "FAIL (1/2)" in table and "skip [1]" in table and "[1] no functional executor" in table
    assert ParityReport.from_json(report.to_json()).to_json() == report.to_json()


def test_the_terminal_table_fits_120_columns_shares_footnotes_and_groups_rows_that_skip_alike() -> None:
    """Executors as short columns, each detail a footnote that every row shares, the rows that skip in every
    column for one reason on one group line, the column without a TE executor explained; no line wider than 120."""
    report = ParityReport(environment={})
    long_reason = "TransformerEngine is not installed; the FP8 tiers need it, on an FP8 GPU host " * 2
    for n in range(30):
        for executor in ("legacy", "functional"):
            report.record(f"numerics-with-a-long-name-number-{n}[delayed-e4m3-len4-max]", executor,
                          TestOutcome(f"t{n}{executor}", "skip", long_reason))
    report.record("ddp[delayed]", "legacy", TestOutcome("a", "known", "m", known_defect="some-defect"))
    report.record("ddp[delayed]", "functional", TestOutcome("b", "skip", long_reason))
    report.record("torch-autocast", "legacy", TestOutcome("c", "FAIL", "x", near_miss="other-defect"))
    report.record("torch-autocast", "functional", TestOutcome("d", "XPASS", "known upstream defect decoy: ...",
                                                               did_not_show=["fixed-defect", "also-fixed"]))
    report.record("ddp-transform-matches-torch-ddp", None, TestOutcome("e", "pass", ""))
    lines = terminal_table(report)
    assert max(map(len, lines)) <= 120, max(lines, key=len)
    assert lines[0].split() == ["check", "legacy", "functional", "no", "TE"]
    text = "\n".join(lines)
    assert text.count(long_reason.strip()[:40]) == 1, "one footnote for a reason every row shares"
    skip = re.search(r"^\[(\d+)\] TransformerEngine is not installed", text, re.M).group(1)
    assert f"skip [{skip}] in every column: numerics-with-a-long-name-number-0[delayed-e4m3-len4-max]," in text
    assert not any(line.startswith("numerics-with-a-long-name") for line in lines), "rows that skip alike are grouped"
    assert re.search(rf"ddp\[delayed\] +known \[\d\] +skip \[{skip}\]", text), text
    assert "matches other-defect outside its range" in text and "fixed-defect did not show" in text
    assert "also-fixed did not show" in text and "decoy" not in text, "an XPASS names its covering entries, from data"
    assert "no TE: the checks that run no TE executor (thunder's DDP and FSDP transforms, against torch's)" in lines


def test_the_gate_on_this_machine_prints_no_line_over_120_columns(tmp_path: Path) -> None:
    root = REPO
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'b'}",
                           f"--teparity-report={report}"], cwd=root, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "120"})  # a 120-column terminal: pytest fills its width
    assert done.returncode == 0, done.stdout[-3000:]
    wide = [line for line in done.stdout.splitlines() if len(line) > 120]
    assert not wide, wide
    said = unwrapped(done.stdout, CONTINUED_INDENT).splitlines()
    verdict = next(line for line in said if line.startswith("teparity: GREEN") or line.startswith("teparity: RED"))
    assert re.fullmatch(rf"teparity: GREEN \(exit 0\): 0 FAIL, 0 XPASS; \d+ pass, \d+ known, \d+ skip; parity report JSON: {re.escape(str(report))}",
                        verdict), verdict
    assert said[said.index(verdict) + 1].startswith("="), "the verdict is the parity report's last line, before pytest's summary"


def test_from_json_rejects_other_files() -> None:
    with pytest.raises(ValueError, match="not a teparity parity report"):
        ParityReport.from_json({"schema": "other"})


def test_a_parallel_run_reports_every_cell_with_evidence(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_checks="""
        import pytest

        @pytest.mark.parametrize("executor", ["legacy", "functional"])
        @pytest.mark.check("alpha")
        def test_alpha(executor, evidence):
            evidence(f"alpha ran on {executor}")
            assert executor == "legacy", "functional differs"

        @pytest.mark.parametrize("executor", ["legacy", "functional"])
        @pytest.mark.check("beta")
        def test_beta(executor):
            pytest.skip(f"no {executor} here")

        @pytest.mark.check("gamma")
        def test_gamma():
            pass
        """
    )
    result = pytester.runpytest_subprocess(
        "-n", "2", "-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-report", "report.json"
    )
    result.assert_outcomes(passed=2, failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*teparity parity report*", "alpha*pass*FAIL (1/1)*"])
    data = json.loads((pytester.path / "report.json").read_text())
    cells = {(r["check"], r["executor"]): r for r in data["results"]}
    assert cells[("alpha", "legacy")]["outcome"] == "pass"
    assert cells[("alpha", "legacy")]["tests"][0]["evidence"] == "alpha ran on legacy"
    assert cells[("alpha", "functional")]["outcome"] == "FAIL"
    assert "functional differs" in cells[("alpha", "functional")]["tests"][0]["evidence"]
    assert cells[("beta", "functional")]["tests"][0]["evidence"] == "no functional here"
    assert cells[("gamma", "-")]["outcome"] == "pass"
    assert data["environment"]["versions"]["thunder"] is not None
    assert data["exitstatus"] == 1
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent).stdout.strip()
    assert head and data["environment"]["teparity_commit"].startswith(head)
    assert data["environment"]["world_size"] == 2
    assert data["environment"]["backend"] in ("gloo", "nccl")


def test_te_settings_from_the_environment_are_in_the_header_and_the_report(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVTE_UNFUSED_FP8_UPDATE=1 turns the functional executor's scale drift off: a report must say so."""
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "1")
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-report", "report.json")
    result.stdout.fnmatch_lines(["teparity: TE settings from the environment: {'NVTE_UNFUSED_FP8_UPDATE': '1'}"])
    data = json.loads((pytester.path / "report.json").read_text())
    assert data["environment"]["te_settings"] == {"NVTE_UNFUSED_FP8_UPDATE": "1"}


def test_a_cell_shows_a_failure_before_an_xpass_before_a_known_defect_before_a_pass() -> None:
    report = ParityReport(environment={})
    outcomes = [TestOutcome("p", "pass", ""), TestOutcome("k", "known", "m", known_defect="some-defect"),
                TestOutcome("x", "XPASS", "fixed?"), TestOutcome("f", "FAIL", "new")]
    for count in range(1, len(outcomes) + 1):
        report.record(f"c{count}", "legacy", outcomes[count - 1])
        for earlier in outcomes[: count - 1]:
            report.record(f"c{count}", "legacy", earlier)
    assert [report.cells[(f"c{n}", "legacy")].outcome for n in range(1, 5)] == ["pass", "known", "XPASS", "FAIL"]
    assert report.cells[("c2", "legacy")].short() == "known (some-defect)"
    assert report.cells[("c3", "legacy")].short() == "XPASS (1/3)"


def test_an_unregistered_expected_failure_is_known_without_an_id(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_x="""
        import pytest

        @pytest.mark.check("known-upstream-bug")
        @pytest.mark.xfail(strict=True, reason="upstream issue 123")
        def test_bug():
            assert False, "the bug"
        """
    )
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-report", "r.json")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["known-upstream-bug*known [[]1[]]*", "[[]1[]] known upstream defect unregistered"])
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["results"][0]["outcome"] == "known" and data["exitstatus"] == 0
    assert "the bug" in data["results"][0]["tests"][0]["evidence"]


def _report(thunder: str, te: str | None, cells: list[tuple[str, str, TestOutcome]]) -> ParityReport:
    report = ParityReport(environment={
        "versions": {"thunder": thunder, "torch": "2.11.0", "transformer_engine": te}, "world_size": 2, "backend": "gloo",
    })
    for check, executor, outcome in cells:
        report.record(check, executor, outcome)
    return report


def test_the_compatibility_matrix_has_a_verdict_per_executor_and_a_row_per_stack(tmp_path) -> None:
    from teparity.__main__ import main

    cpu = _report("0.2.6", None, [("bwd-sync-placement[1proc]", "legacy", TestOutcome("t", "pass", ""))])
    gpu = _report("0.2.6", "2.9.0", [
        ("bwd-sync-placement[1proc]", "legacy", TestOutcome("t", "pass", "")),
        ("fwd-has-no-sync[1proc]", "legacy", TestOutcome("u", "pass", "")),
        ("numerics[delayed]", "functional", TestOutcome("n", "FAIL", "PartedFromEager: 3 difference(s), first: scale | off")),
        ("numerics[delayed]", "legacy", TestOutcome("m", "skip", "no TE")),
        ("ddp-grad-accumulation", "functional", TestOutcome(
            "k", "known", "KnownDefect_x: [known upstream defect x] long story",
            known_defect="grad-accumulation-fp8-state-per-cache-entry")),
        ("ddp-grad-accumulation", "legacy", TestOutcome(
            "k", "known", "...", known_defect="grad-accumulation-fp8-state-per-cache-entry")),
    ])
    (tmp_path / "gpu").mkdir()
    gpu.write(tmp_path / "gpu" / "gate.json")
    (tmp_path / "cpu").mkdir()
    cpu.write(tmp_path / "cpu" / "parity-report.json")
    (tmp_path / "docs").mkdir()
    out = tmp_path / "docs" / "m.md"
    assert main(["matrix", str(tmp_path / "cpu" / "parity-report.json"), str(tmp_path / "gpu" / "gate.json"), "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[:2] == [
        "- **functional**: **FAIL** (numerics FAIL [1]) on thunder 0.2.6 with TE 2.9.0.",
        # Only the trace-only sync checks passed: known defects do not make it "work".
        "- **legacy**: Works on thunder 0.2.6 without TE. No check that runs TE passed: known defects "
        "(`grad-accumulation-fp8-state-per-cache-entry`) on thunder 0.2.6 with TE 2.9.0.",
    ]
    assert "| thunder | torch | TE | executor | ranks | reports | backward sync | numerics | grad accumulation |" in lines
    assert "| 0.2.6 | 2.11.0 | - | legacy | 2 gloo | [cpu](../cpu/parity-report.json) | pass |  |  |" in lines
    assert "| 0.2.6 | 2.11.0 | 2.9.0 | legacy | 2 gloo | [gpu/gate](../gpu/gate.json) | pass | skip [2] | known [3] |" in lines
    assert "| 0.2.6 | 2.11.0 | 2.9.0 | functional | 2 gloo | [gpu/gate](../gpu/gate.json) |  | FAIL [1] | known [3] |" in lines
    assert "2. no TE" in lines and "1. numerics[delayed]: scale \\| off" in lines
    assert any(line.startswith("3. known `grad-accumulation-fp8-state-per-cache-entry`: under skip_data_parallel") for line in lines)


def test_an_executor_works_with_known_defects_only_where_a_check_that_runs_te_passed() -> None:
    from teparity.tools.matrix import Footnotes, _verdict

    known = TestOutcome("k", "known", "...", known_defect="grad-accumulation-fp8-state-per-cache-entry")
    works = _report("0.2.6", "2.9.0", [("numerics[delayed]", "functional", TestOutcome("n", "pass", "")),
                                       ("ddp-grad-accumulation", "functional", known)])
    assert _verdict([works], "functional", Footnotes())[0] == "works, with known defects"
    lost = _report("0.2.6", "2.12.0", [("bwd-sync-placement[1proc]", "legacy", TestOutcome("s", "pass", "")),
                                       ("numerics[delayed]", "legacy", TestOutcome("n", "skip", "declined")),
                                       ("ddp-grad-accumulation", "legacy", known)])
    assert _verdict([lost], "legacy", Footnotes())[0] == "no check that runs TE passed: known defects"


def test_doctor_says_what_runs_here() -> None:
    import subprocess
    import sys

    from teparity.launch import rank_env

    # The environment the gate's ranks get, so that doctor probes (and caches) what the gate will read.
    clean = {k: v for k, v in os.environ.items() if k not in rank_env.DEFAULTS}
    out = subprocess.run([sys.executable, "-m", "teparity", "doctor"], capture_output=True, text=True, check=True, env=clean).stdout
    for tier in ("tests/trace", "tests/numerics", "tests/features", "tests/ddp", "tests/fsdp", "harness -m fp8"):
        assert f"({tier}): runs" in out or f"({tier}): skips: " in out, (tier, out)
    assert "multi-rank backend for 2 ranks: " in out
    assert "forked ranks: the fork server imports torch, thunder" in out, out
    assert "PYTORCH_NVML_BASED_CUDA_CHECK=1 (teparity default)" in out, out


def test_doctor_covers_every_tier_of_the_gate() -> None:
    """Every tier directory the gate collects (the folders of pytest's testpaths) has a line of its own in doctor's
    answer."""
    from teparity.cli.doctor import tiers
    from teparity.stack.envprobe import environment

    testpaths = re.findall(r'"([^"]+)"', re.search(r"^testpaths = \[(.*)\]$", (REPO / "pyproject.toml").read_text(), re.M).group(1))
    folders = sorted(f"{path}/{tier.name}" for path in testpaths for tier in (REPO / path).iterdir() if any(tier.glob("test_*.py")))
    named = " ".join(tiers(environment(), "gloo"))
    assert folders and all(f"({folder})" in named for folder in folders), (folders, named)


def test_diff_of_a_real_report_sees_a_regression_and_no_change_of_words(tmp_path: Path) -> None:
    """``diff`` of a CPU gate's report: exit 0 where it agrees with itself and where only a test's evidence's words moved;
    exit 1 naming the test, with both outcomes, where a pass became a failure."""
    before = REPO / "docs" / "results" / "cpu-refactor-4306794-bb0deed" / "gate-4306794.json.gz"
    same = subprocess.run([sys.executable, "-m", "teparity", "diff", str(before), str(before)], capture_output=True, text=True)
    assert same.returncode == 0 and same.stdout.startswith("0 regressed, 0 fixed, 0 changed, 0 explained by the other versions, 0 new, 0 removed"), same.stdout
    data = read_json(before)
    test = next(t for result in data["results"] for t in result["tests"] if t["outcome"] == "pass")
    test["evidence"] += "; one more word"
    worded = tmp_path / "worded.json"
    worded.write_text(json.dumps(data))
    words = subprocess.run([sys.executable, "-m", "teparity", "diff", str(before), str(worded)], capture_output=True, text=True)
    assert words.returncode == 0 and words.stdout.startswith("0 regressed, 0 fixed, 0 changed"), words.stdout
    test["outcome"] = "FAIL"
    red = tmp_path / "red.json"
    red.write_text(json.dumps(data))
    changed = subprocess.run([sys.executable, "-m", "teparity", "diff", str(before), str(red)], capture_output=True, text=True)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert changed.stdout.splitlines()[0] == f"regressed: {test['nodeid']} (pass -> FAIL)", changed.stdout


def test_a_comparison_outside_parity_records_its_numbers_in_the_report(pytester: pytest.Pytester) -> None:
    """The transform checks compare without ``parity``: the ``numbers`` fixture puts their tensor count, largest
    difference and rule in the report, as ``parity`` does."""
    pytester.makepyfile(
        test_transform="""
        import pytest
        import torch
        from teparity.judge.compare import Comparison

        @pytest.mark.check("transform")
        def test_transform(numbers, evidence):
            result = Comparison()
            result.note("grad@step0", torch.zeros(3), torch.full((3,), 0.5))
            numbers(result)
            evidence(result.summary())
        """
    )
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-report", "r.json")
    result.assert_outcomes(passed=1)
    test = json.loads((pytester.path / "r.json").read_text())["results"][0]["tests"][0]
    assert test["numbers"]["tensors_compared"] == 1 and test["numbers"]["max_abs"] == {"grad": 0.5}, test


def test_the_verdict_says_green_or_red_and_why() -> None:
    """The terminal report's last line and the job summary's heading: GREEN only at exit 0; RED with the counts of
    FAIL and XPASS tests, a system under test that does not import, or a failure the table does not hold."""
    report = _report("0.2.6", None, [("c", "legacy", TestOutcome("t1", "pass", "")), ("c", "legacy", TestOutcome("t2", "skip", "x")),
                                     ("d", "functional", TestOutcome("t3", "known", "k", known_defect="e"))])
    assert report.verdict(0) == "GREEN (exit 0): 0 FAIL, 0 XPASS; 1 pass, 1 known, 1 skip"
    assert report.verdict(2) == "RED (exit 2, interrupted): 0 FAIL, 0 XPASS; a failure outside the parity table (pytest's own summary names it)"
    report.record("c", "functional", TestOutcome("t4", "FAIL", "boom"))
    report.record("d", "legacy", TestOutcome("t5", "XPASS", "known upstream defect e: ..."))
    report.record("d", "legacy", TestOutcome("t6", "FAIL", "boom"))
    assert report.verdict(1) == "RED (exit 1): 2 FAIL, 1 XPASS"
    from teparity.stack.environment import Environment
    from teparity.stack.versions import Versions

    broken = Environment(Versions("2.11.0", "0.2.6", None), (), {}, te_import_error=None, thunder_import_error="ImportError: no")
    report.environment = broken.to_json()
    assert report.verdict(1) == ("RED (exit 1): 2 FAIL, 1 XPASS; the system under test does not import or is an unsupported "
                                 "pair: lightning-thunder 0.2.6: ImportError: no")
