"""``python -m teparity bench``: the same gate fresh, warm and forked, judged identical only when every
verdict and evidence line is, with each mode's start-up summed from the rank and fork-server logs; and
``python -m teparity repeat``, which names every test that changed between runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teparity.tools import repeat as repeating
from teparity.tools.bench import differing_tests, startup
from teparity.tools.killmatrix import GateRun


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
    assert differing_tests(same, moved, _report(("t::a", "pass", "max|d| 0; rank logs: /tmp/w"), ("t::b", "known", "3 differences"))) == ["t::b"]


def test_startup_sums_each_phase_over_every_rank_log(tmp_path: Path) -> None:
    (tmp_path / "gw0" / "ranks-1").mkdir(parents=True)
    (tmp_path / "gw0" / "ranks-1" / "rank0.log").write_text(
        "teparity rank 0 start-up: import torch 2.50 s, gloo process group 0.10 s\n"
        "teparity rank preload: import transformer_engine 4.00 s, import thunder 3.00 s, CUDA init 0.40 s\n")
    (tmp_path / "gw0" / "ranks-1" / "rank1.log").write_text(
        "teparity rank 1 start-up: import torch 2.50 s, nccl process group 1.00 s\n"
        "teparity rank task: teparity.inrank.sides.run_eager 1.25 s\nTraceback (most recent call last):\n")
    (tmp_path / "forkserver").mkdir(parents=True)  # the controller's: one for the run
    (tmp_path / "forkserver" / "forkserver.log").write_text(
        "teparity fork server: pid 12 for pid 10, at /tmp/x/forkserver/forkserver.sock\n"
        "teparity fork server preload: import torch 3.00 s, import transformer_engine 5.00 s\n"
        "teparity fork server: serving pid 14\nteparity fork server: serving pid 15\n")
    summary = startup(tmp_path)
    assert summary["processes"] == 2 and summary["fork_servers"] == 1 and summary["fork_server_clients"] == 2
    assert summary["seconds"] == {"import torch": 8.0, "process group": 1.1, "import transformer_engine": 9.0,
                                  "import thunder": 3.0, "CUDA init": 0.4}
    assert summary["total_s"] == 21.5
    assert summary["tasks"] == {"teparity.inrank.sides.run_eager": 1.25} and summary["tasks_s"] == 1.2


def test_repeat_names_each_test_that_changed_with_the_runs_that_saw_each_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake gate runner: run 2 of 3 gives another number for one test; the others agree."""
    steady = _report(("t::a", "pass", "max|d| 0"), ("t::b", "pass", "bitwise"))
    flaky = _report(("t::a", "pass", "max|d| 0.001"), ("t::b", "pass", "bitwise"))
    reports = iter([steady, flaky, steady])
    monkeypatch.setattr("teparity.tools.killmatrix.run_gate", lambda *args, **kwargs: GateRun(None, 0, "", next(reports)))
    result, stable = repeating.repeat(3, ["tests/trace"], tmp_path, progress=lambda line: None)
    assert not stable and list(result["changed"]) == ["t::a"]
    assert result["changed"]["t::a"] == [{"runs": [1, 3], "outcome": "pass", "evidence": "max|d| 0"},
                                         {"runs": [2], "outcome": "pass", "evidence": "max|d| 0.001"}]
    assert json.loads((tmp_path / "repeat.json").read_text())["changed"] == result["changed"]
    agreeing = iter([steady, steady])
    monkeypatch.setattr("teparity.tools.killmatrix.run_gate", lambda *args, **kwargs: GateRun(None, 0, "", next(agreeing)))
    assert repeating.repeat(2, [], tmp_path, progress=lambda line: None)[1]
    empty = iter([{}, {}])
    monkeypatch.setattr("teparity.tools.killmatrix.run_gate", lambda *args, **kwargs: GateRun(None, 5, "", next(empty)))
    assert not repeating.repeat(2, [], tmp_path, progress=lambda line: None)[1], "runs that tested nothing agreed"


def test_a_repeat_cut_off_keeps_what_its_finished_runs_saw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadline that ends the repeat during its second run (a fake runner): repeat.json still holds the
    first, and says the repeat is not stable, having run 1 of the 3 asked for."""
    steady = _report(("t::a", "pass", "max|d| 0"))

    def runner(*args, **kwargs) -> GateRun:
        if (tmp_path / "repeat.json").exists():
            raise KeyboardInterrupt("the deadline")
        return GateRun(None, 0, "", steady)

    monkeypatch.setattr("teparity.tools.killmatrix.run_gate", runner)
    with pytest.raises(KeyboardInterrupt):
        repeating.repeat(3, ["tests/trace"], tmp_path, progress=lambda line: None)
    kept = json.loads((tmp_path / "repeat.json").read_text())
    assert kept["asked"] == 3 and [run["run"] for run in kept["runs"]] == [1] and not kept["stable"]


@pytest.mark.multirank
def test_bench_of_the_trace_tier_is_identical_and_says_where_start_up_went(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    completed = subprocess.run(
        # The FSDP-transform checks left out: they add minutes in three modes and no launch path the rest lacks.
        [sys.executable, "-m", "teparity", "bench", "--workdir", str(tmp_path), "--", "tests/trace", "-p", "no:xdist",
         "-k", "not fsdp_transform"],
        cwd=root, capture_output=True, text=True, timeout=600, check=False,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["identical"] and result["tests"] > 0
    assert result["exitstatus"] == {"fresh": 0, "warm": 0, "forked": 0, "served": 0}, result["exitstatus"]
    fresh, warm, forked, served = (result["startup"][mode] for mode in ("fresh", "warm", "forked", "served"))
    for mode in (fresh, warm, forked):
        assert {"import torch", "process group", "import thunder"} <= mode["seconds"].keys(), result["startup"]
    assert fresh["processes"] >= warm["processes"] == forked["processes"] == served["processes"] > 0, result["startup"]
    assert forked["fork_servers"] == 1 and warm["fork_servers"] == 0, result["startup"]
    # served: the ranks came from the bench's own fork server, which imported torch and thunder before any run.
    pid = result["served_fork_server"]["pid"]
    # (Its ranks log thunder's import as 0.00 s each, which rounds to a few hundredths summed.)
    assert served["fork_servers"] == 0, result["startup"]
    assert served["seconds"]["import thunder"] < 0.1 * warm["seconds"]["import thunder"], result["startup"]
    assert f"the fork server of python -m teparity bench, pid {pid}," in result["launch"]["served"], result["launch"]
    assert "one fork server for the run" in result["launch"]["forked"], result["launch"]
    # The fork server imported torch and thunder once for all the forked ranks.
    assert forked["seconds"]["import thunder"] < warm["seconds"]["import thunder"], result["startup"]
    assert "rank processes and 1 fork servers started" in completed.stderr
