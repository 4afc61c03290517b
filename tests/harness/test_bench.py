"""``python -m teparity bench``: the same gate fresh and warm, judged identical only when every verdict
and evidence line is, with each mode's start-up summed from the rank logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teparity.tools.bench import differing_tests, startup


def _report(*tests: tuple[str, str, str]) -> dict:
    return {"results": [{"check": "c", "executor": "legacy", "outcome": "pass",
                         "tests": [{"nodeid": n, "outcome": o, "evidence": e} for n, o, e in tests]}]}


def test_a_verdict_or_a_number_that_differs_is_named_and_temporary_paths_are_not() -> None:
    same = _report(("t::a", "pass", "max|d| 0; rank logs: /tmp/x"), ("t::b", "known", "2 differences"))
    moved = _report(("t::a", "pass", "max|d| 0; rank logs: /tmp/y"), ("t::b", "known", "2 differences"))
    assert differing_tests(same, moved) == []
    assert differing_tests(same, _report(("t::a", "pass", "max|d| 0.5"), ("t::b", "known", "2 differences"))) == ["t::a"]
    # A changed outcome, and a test that one run does not have.
    assert differing_tests(same, _report(("t::a", "FAIL", "max|d| 0; rank logs: /tmp/z"))) == ["t::a", "t::b"]


def test_startup_sums_each_phase_over_every_rank_log(tmp_path: Path) -> None:
    (tmp_path / "gw0" / "ranks-1").mkdir(parents=True)
    (tmp_path / "gw0" / "ranks-1" / "rank0.log").write_text(
        "teparity rank 0 start-up: import torch 2.50 s, gloo process group 0.10 s\n"
        "teparity rank preload: import transformer_engine 4.00 s, import thunder 3.00 s, CUDA init 0.40 s\n")
    (tmp_path / "gw0" / "ranks-1" / "rank1.log").write_text(
        "teparity rank 1 start-up: import torch 2.50 s, nccl process group 1.00 s\nTraceback (most recent call last):\n")
    summary = startup(tmp_path)
    assert summary["processes"] == 2
    assert summary["seconds"] == {"import torch": 5.0, "process group": 1.1, "import transformer_engine": 4.0,
                                  "import thunder": 3.0, "CUDA init": 0.4}
    assert summary["total_s"] == 13.5


@pytest.mark.multirank
def test_bench_of_the_trace_tier_is_identical_and_says_where_start_up_went(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    completed = subprocess.run(
        [sys.executable, "-m", "teparity", "bench", "--workdir", str(tmp_path), "--", "tests/trace", "-p", "no:xdist"],
        cwd=root, capture_output=True, text=True, timeout=600, check=False,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["identical"] and result["tests"] > 0 and result["exitstatus"] == {"fresh": 0, "warm": 0}
    fresh, warm = result["startup"]["fresh"], result["startup"]["warm"]
    for mode in (fresh, warm):
        assert {"import torch", "process group", "import thunder"} <= mode["seconds"].keys(), result["startup"]
    assert fresh["processes"] >= warm["processes"] > 0, result["startup"]
    assert "rank processes started" in completed.stderr
