"""ranges: consecutive versions with identical verdicts become one row of the compatibility table, which
still links every report; a differing verdict, another thunder build or an absent TE keeps rows apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from teparity.tools.matrix import compatibility_matrix
from teparity.tools.ranges import Run, Span, collapse
from teparity.report.parity import ParityReport, TestOutcome
from harness import REPO

LOST = TestOutcome("t", "known", "no linear held by TE", known_defect="legacy-executor-loses-te-from-te-2.10")


def _run(te: str | None, numerics: TestOutcome, thunder: str = "0.2.6", world: int = 2) -> Run:
    report = ParityReport(environment={
        "versions": {"thunder": thunder, "torch": "2.11.0", "transformer_engine": te}, "world_size": world, "backend": "gloo",
    })
    report.record("bwd-sync-placement[1proc]", "legacy", TestOutcome("s", "pass", "sync before the return"))
    report.record("numerics[delayed]", "legacy", numerics)
    return Run(f"te-{te}/gate", f"te-{te}/gate.json", report)


def _versions(spans: list[Span], axis: str = "te") -> list[list[str]]:
    return [[run.version(axis) for run in span.runs] for span in spans]


def test_identical_neighbours_collapse_into_one_row_that_links_each_report() -> None:
    runs = [_run(te, TestOutcome("n", "pass", f"max |diff| {i}")) for i, te in enumerate(["2.10.0", "2.11.0", "2.12.0"])]
    (span,) = collapse(runs)
    assert span.field("te") == "2.10.0 .. 2.12.0, 3 versions"
    assert span.field("thunder") == "0.2.6"
    assert span.links() == "[2.10.0](te-2.10.0/gate.json) [2.11.0](te-2.11.0/gate.json) [2.12.0](te-2.12.0/gate.json)"


def test_a_differing_verdict_splits_and_equal_verdicts_apart_do_not_join() -> None:
    passed = TestOutcome("n", "pass", "")
    runs = [_run("2.9.0", passed), _run("2.10.0", LOST), _run("2.11.0", LOST), _run("2.12.0", passed)]
    assert _versions(collapse(runs)) == [["2.9.0"], ["2.10.0", "2.11.0"], ["2.12.0"]]


def test_the_same_outcome_with_another_known_defect_is_another_verdict() -> None:
    other = TestOutcome("t", "known", "no linear held by TE", known_defect="some-other-defect")
    assert _versions(collapse([_run("2.10.0", LOST), _run("2.11.0", other)])) == [["2.10.0"], ["2.11.0"]]


def test_versions_are_ordered_as_versions_and_a_gap_does_not_split() -> None:
    """2.9.0 before 2.10.0 (not as strings). A TE with no report (2.12.0) between two with the same verdict
    does not split them: the span counts and links only the versions run."""
    runs = [_run(te, LOST) for te in ["2.13.0", "2.10.0", "2.9.0", "2.11.0"]]
    (span,) = collapse(runs)
    assert _versions([span]) == [["2.9.0", "2.10.0", "2.11.0", "2.13.0"]]
    assert span.field("te") == "2.9.0 .. 2.13.0, 4 versions"
    assert "2.12.0" not in span.links()
    assert span.links() == "[2.9.0](te-2.9.0/gate.json) .. [2.13.0](te-2.13.0/gate.json)"  # more than LINKED: its ends


def test_other_thunder_builds_and_world_sizes_are_other_rows_and_no_te_never_joins_a_te() -> None:
    passed = TestOutcome("n", "pass", "")
    runs = [_run("2.9.0", passed), _run("2.10.0", passed, thunder="0.2.7.dev20260201"), _run("2.10.0", passed, world=4),
            _run(None, passed), _run("2.11.0", passed)]
    assert _versions(collapse(runs)) == [["2.9.0", "2.11.0"], ["2.10.0"], ["2.10.0"], ["-"]]


def test_along_thunder_the_builds_of_one_te_collapse() -> None:
    passed = TestOutcome("n", "pass", "")
    runs = [_run(None, passed, thunder=th) for th in ["0.2.2", "0.2.10", "0.2.1"]] + [_run(None, LOST, thunder="0.2.0.dev20240707")]
    spans = collapse(runs, "thunder")
    assert _versions(spans, "thunder") == [["0.2.0.dev20240707"], ["0.2.1", "0.2.2", "0.2.10"]]
    assert spans[1].field("thunder") == "0.2.1 .. 0.2.10, 3 versions" and spans[1].field("te") == "-"


def test_two_reports_of_one_version_are_linked_by_name() -> None:
    first, second = _run("2.12.0", LOST), _run("2.12.0", LOST)
    second = Run("te-2.12.0/ddp-gloo-2", "te-2.12.0/ddp-gloo-2.json", second.report)
    (span,) = collapse([first, second])
    assert span.field("te") == "2.12.0, 2 reports"
    assert span.links() == "[te-2.12.0/gate](te-2.12.0/gate.json) [te-2.12.0/ddp-gloo-2](te-2.12.0/ddp-gloo-2.json)"


def test_a_collapsed_row_keeps_the_footnote_of_every_report_and_one_verdict_line_per_executor() -> None:
    """Same verdict, different evidence: the row quotes each distinct failure once; on top, one line."""
    runs = [_run(te, TestOutcome("n", "FAIL", f"PartedFromEager: 1 difference(s), first: out by {te}"))
            for te in ["2.10.0", "2.11.0", "2.12.0"]]
    lines = compatibility_matrix(runs).splitlines()
    rows = [line for line in lines if line.startswith("| 0.2.6")]
    assert rows == ["| 0.2.6 | 2.11.0 | 2.10.0 .. 2.12.0, 3 versions | legacy | 2 gloo | [2.10.0](te-2.10.0/gate.json) "
                    "[2.11.0](te-2.11.0/gate.json) [2.12.0](te-2.12.0/gate.json) | pass | FAIL [1][2][3] |"]
    assert lines[0] == ("- **legacy**: **FAIL** (numerics FAIL [1][2][3]) on thunder 0.2.6 with TE 2.10.0 .. 2.12.0, "
                        "3 versions.")
    assert [line for line in lines if line[:2] in ("1.", "2.", "3.")] == [
        f"{n}. numerics[delayed]: out by {te}" for n, te in enumerate(["2.10.0", "2.11.0", "2.12.0"], 1)]


def test_the_matrix_command_takes_the_axis_and_refuses_another(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from teparity.__main__ import main

    for thunder in ("0.2.5", "0.2.6"):
        (tmp_path / thunder).mkdir()
        _run(None, TestOutcome("n", "pass", ""), thunder=thunder).report.write(tmp_path / thunder / "parity-report.json")
    paths = [str(tmp_path / th / "parity-report.json") for th in ("0.2.5", "0.2.6")]
    assert main(["matrix", "--along", "thunder", *paths]) == 0
    assert "| 0.2.5 .. 0.2.6, 2 versions | 2.11.0 | - | legacy |" in capsys.readouterr().out
    assert main(["matrix", *paths]) == 0
    assert capsys.readouterr().out.count("| legacy |") == 2
    with pytest.raises(SystemExit) as refused:
        main(["matrix", "--along", "torch", *paths])
    assert refused.value.code == 2 and "invalid choice: 'torch'" in capsys.readouterr().err


def test_the_compatibility_document_is_current_links_every_report_and_has_at_most_60_rows(tmp_path: Path) -> None:
    """docs/compatibility.md is what scripts/compatibility.sh makes of the committed reports (regenerate it
    after a change here), within 60 table rows, and every report it links is committed."""
    import subprocess
    import sys

    root = REPO
    out = tmp_path / "compatibility.md"
    subprocess.run(["bash", str(root / "scripts" / "compatibility.sh"), sys.executable, str(out)], check=True,
                   capture_output=True, text=True)
    committed = (root / "docs" / "compatibility.md").read_text()
    assert out.read_text() == committed, "docs/compatibility.md is stale: run scripts/compatibility.sh"
    rows = [line for line in committed.splitlines() if line.startswith("| ") and not line.startswith("| thunder |")]
    assert len(rows) <= 60, f"{len(rows)} table rows"
    linked = re.findall(r"\]\((results/[^)]+\.json(?:\.gz)?)\)", committed)
    assert linked and all((root / "docs" / link).is_file() for link in linked)
