"""``python -m teparity bench``: the same gate fresh, warm and forked, judged identical only when every
verdict and evidence line is, with each mode's start-up summed from the rank and fork-server logs; and
``python -m teparity repeat``, which names every test that changed between runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from teparity.tools import bench as benching
from teparity.tools import gate_runs
from teparity.tools import repeat as repeating
from teparity.tools.bench import differing_tests, startup
from teparity.tools.gate_runs import GateRun
from harness import REPO

_WARM = ["tests/trace", "--teparity-ranks=warm"]  # no fork server for a fake gate's runs


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
    (tmp_path / "gw1" / "ranks-1").mkdir(parents=True)  # a standby's: its preload ran before the run
    (tmp_path / "gw1" / "ranks-1" / "rank0.log").write_text(
        "teparity rank: a standby rank of the fork server (pid 12), ready 4.20 s after its fork at 10:00:00.000\n"
        "teparity rank preload, done before this run: import thunder 1.50 s, CUDA init 0.40 s\n"
        "teparity rank 0 start-up: import torch 0.00 s, gloo process group 0.10 s\n")
    (tmp_path / "forkserver").mkdir(parents=True)  # the controller's: one for the run
    (tmp_path / "forkserver" / "forkserver.log").write_text(
        "teparity fork server: pid 12 for pid 10, at /tmp/x/forkserver/forkserver.sock\n"
        "teparity fork server preload: import torch 3.00 s, import transformer_engine 5.00 s\n"
        "teparity fork server: serving pid 14\nteparity fork server: serving pid 15\n")
    summary = startup(tmp_path)
    assert summary["processes"] == 3 and summary["fork_servers"] == 1 and summary["fork_server_clients"] == 2
    assert summary["standby"] == 1
    assert summary["seconds"] == {"import torch": 8.0, "process group": 1.2, "import transformer_engine": 9.0,
                                  "import thunder": 3.0, "CUDA init": 0.4}
    assert summary["total_s"] == 21.6
    assert summary["tasks"] == {"teparity.inrank.sides.run_eager": 1.25} and summary["tasks_s"] == 1.2


class _SlowStandbys(SimpleNamespace):
    """A fake served fork server (``teparity.tools.served.served``) whose standby ranks take 1 s to be ready."""

    def __init__(self) -> None:
        super().__init__(env={}, pid=1, ready_s=0.1, standby_ready_s=0.1, waits=0)

    def wait_for_standby(self) -> float:
        self.waits += 1
        time.sleep(1.0)
        return 1.0

    def standby_status(self) -> dict:
        return {"ready": 2, "warming": 0, "taken": 4, "failed": None}

    @contextmanager
    def served(self, *args: object, **kwargs: object) -> Iterator["_SlowStandbys"]:
        yield self


def test_a_served_runs_seconds_leave_out_the_wait_for_its_standby_ranks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench waits, untimed, before each served run until the standby ranks that the run before took are
    ready again: a served run's seconds are its own (a bench once timed the wait with the run)."""
    server = _SlowStandbys()
    monkeypatch.setattr(benching, "served", server.served)
    monkeypatch.setattr(gate_runs, "run_gate", lambda *args, **kwargs: GateRun(None, 0, "", _report(("t", "pass", "e"))))
    result, identical = benching.bench(["tests/trace"], tmp_path, ("served",), progress=lambda line: None, standby_ranks=2)
    assert identical and server.waits == 2, result  # before the warm-up, then before the run
    assert result["seconds"]["served"] < 0.5, result["seconds"]
    assert result["served_fork_server"]["standby_waits_s"] == {"warmup": 1.0, "served": 1.0}, result["served_fork_server"]


def test_repeat_names_each_test_that_changed_with_the_runs_that_saw_each_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake gate runner: run 2 of 3 gives another number for one test; the others agree."""
    steady = _report(("t::a", "pass", "max|d| 0"), ("t::b", "pass", "bitwise"))
    flaky = _report(("t::a", "pass", "max|d| 0.001"), ("t::b", "pass", "bitwise"))
    reports = iter([steady, flaky, steady])
    monkeypatch.setattr("teparity.tools.gate_runs.run_gate", lambda *args, **kwargs: GateRun(None, 0, "", next(reports)))
    result, stable = repeating.repeat(3, _WARM, tmp_path, progress=lambda line: None)
    assert not stable and list(result["changed"]) == ["t::a"]
    assert result["changed"]["t::a"] == [{"runs": [1, 3], "outcome": "pass", "evidence": "max|d| 0"},
                                         {"runs": [2], "outcome": "pass", "evidence": "max|d| 0.001"}]
    assert json.loads((tmp_path / "repeat.json").read_text())["changed"] == result["changed"]
    agreeing = iter([steady, steady])
    monkeypatch.setattr("teparity.tools.gate_runs.run_gate", lambda *args, **kwargs: GateRun(None, 0, "", next(agreeing)))
    assert repeating.repeat(2, _WARM, tmp_path, progress=lambda line: None)[1]
    empty = iter([{}, {}])
    monkeypatch.setattr("teparity.tools.gate_runs.run_gate", lambda *args, **kwargs: GateRun(None, 5, "", next(empty)))
    assert not repeating.repeat(2, _WARM, tmp_path, progress=lambda line: None)[1], "runs that tested nothing agreed"


def test_a_repeat_cut_off_keeps_what_its_finished_runs_saw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadline that ends the repeat during its second run (a fake runner): repeat.json still holds the
    first, and says the repeat is not stable, having run 1 of the 3 asked for."""
    steady = _report(("t::a", "pass", "max|d| 0"))

    def runner(*args, **kwargs) -> GateRun:
        if (tmp_path / "repeat.json").exists():
            raise KeyboardInterrupt("the deadline")
        return GateRun(None, 0, "", steady)

    monkeypatch.setattr("teparity.tools.gate_runs.run_gate", runner)
    with pytest.raises(KeyboardInterrupt):
        repeating.repeat(3, _WARM, tmp_path, progress=lambda line: None)
    kept = json.loads((tmp_path / "repeat.json").read_text())
    assert kept["asked"] == 3 and [run["run"] for run in kept["runs"]] == [1] and not kept["stable"]


def test_a_repeated_runs_seconds_leave_out_the_wait_for_its_standby_ranks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before each run, untimed, the repeat waits until the standby ranks that the run before took are ready
    again (a repeat's second run once shared the machine with their warm-up, and took 7 s longer)."""
    server = _SlowStandbys()
    monkeypatch.setattr(repeating, "served", server.served)
    monkeypatch.setattr(gate_runs, "run_gate", lambda *args, **kwargs: GateRun(None, 0, "", _report(("t", "pass", "e"))))
    result, stable = repeating.repeat(2, ["tests/trace"], tmp_path, progress=lambda line: None, standby_ranks=2)
    assert stable and server.waits == 2, result
    assert [run["standby_wait_s"] for run in result["runs"]] == [1.0, 1.0], result["runs"]
    assert all(run["seconds"] < 0.5 for run in result["runs"]), result["runs"]


class _Gate:
    """A fake gate runner on a fake clock: each run takes 100 s and writes its parity report where the real
    one does (``WORKDIR/NAME.json``), from ``reports`` in turn."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, reports: list[dict]) -> None:
        self.now, self.reports = 0.0, iter(reports)
        monkeypatch.setattr(repeating, "time", SimpleNamespace(monotonic=lambda: self.now))
        monkeypatch.setattr("teparity.tools.gate_runs.run_gate", self)

    def __call__(self, paths: list[str], workdir: Path, mutation: None, args: list[str], *, name: str, env: None) -> GateRun:
        self.now += 100.0
        report = next(self.reports)
        (workdir / f"{name}.json").write_text(json.dumps(report))
        return GateRun(None, 0, "", report)


def test_a_repeat_in_parts_stops_before_its_deadline_and_resumes_with_the_runs_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Part 1 has 250 s: after two 100 s runs a third would end at 300 s, so it stops; part 2 runs 3 and 4,
    and run 4's other number is named against runs 1-3, across the parts."""
    steady = _report(("t::a", "pass", "max|d| 0"))
    _Gate(monkeypatch, [steady, steady])
    first, stable = repeating.repeat(4, _WARM, tmp_path, progress=lambda line: None, deadline_s=250)
    assert not stable and [run["run"] for run in first["runs"]] == [1, 2]
    kept = json.loads((tmp_path / "repeat.json").read_text())
    assert kept["parts"][0]["runs"] == [1, 2] and kept["parts"][0]["stopped"].startswith("deadline: run 3 would end")
    _Gate(monkeypatch, [steady, _report(("t::a", "pass", "max|d| 0.5"))])
    second, stable = repeating.repeat(4, _WARM, tmp_path, progress=lambda line: None, resume=True)
    assert not stable and [run["part"] for run in second["runs"]] == [1, 1, 2, 2]
    assert [part["runs"] for part in second["parts"]] == [[1, 2], [3, 4]] and second["parts"][1]["stopped"] == "done"
    assert second["changed"]["t::a"] == [{"runs": [1, 2, 3], "outcome": "pass", "evidence": "max|d| 0"},
                                         {"runs": [4], "outcome": "pass", "evidence": "max|d| 0.5"}]


def test_a_resumed_repeat_that_agrees_is_stable_and_a_run_on_another_stack_is_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def on(thunder: str) -> dict:
        return _report(("t::a", "pass", "max|d| 0")) | {"environment": {"versions": {"thunder": thunder}, "launch": thunder}}

    _Gate(monkeypatch, [on("0.2.6"), on("0.2.6")])
    repeating.repeat(3, _WARM, tmp_path, progress=lambda line: None, deadline_s=250)
    _Gate(monkeypatch, [on("0.2.6")])
    result, stable = repeating.repeat(3, _WARM, tmp_path, progress=lambda line: None, resume=True)
    assert stable and result["stack_changed"] == {} and len(result["runs"]) == 3
    (tmp_path / "moved").mkdir()
    _Gate(monkeypatch, [on("0.2.6"), on("0.2.7")])
    result, stable = repeating.repeat(2, _WARM, tmp_path / "moved", progress=lambda line: None)
    assert not stable and not result["changed"]
    assert result["stack_changed"] == {"versions": [{"thunder": "0.2.6"}, {"thunder": "0.2.7"}]}


def test_a_resume_with_nothing_to_continue_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(repeating.ResumeError, match="nothing to resume: .*repeat.json does not exist"):
        repeating.repeat(3, _WARM, tmp_path, resume=True)
    _Gate(monkeypatch, [_report(("t::a", "pass", "")), _report(("t::a", "pass", ""))])
    repeating.repeat(2, _WARM, tmp_path, progress=lambda line: None)
    with pytest.raises(repeating.ResumeError, match="already holds 2 runs of the 2 asked for"):
        repeating.repeat(2, _WARM, tmp_path, resume=True)
    with pytest.raises(repeating.ResumeError, match="repeated other pytest arguments"):
        repeating.repeat(3, ["tests/numerics"], tmp_path, resume=True)
    (tmp_path / "run02.json").unlink()
    with pytest.raises(repeating.ResumeError, match="the parity report of run 2, is gone"):
        repeating.repeat(3, _WARM, tmp_path, resume=True)


@pytest.mark.multirank
def test_bench_of_the_trace_tier_is_identical_and_says_where_start_up_went(tmp_path: Path) -> None:
    root = REPO
    completed = subprocess.run(
        # The DDP checks of the trace tier: 2-rank runs in every launch mode (the whole tier adds minutes
        # in five runs, and no launch path these lack).
        [sys.executable, "-m", "teparity", "bench", "--workdir", str(tmp_path), "--standby-ranks", "2", "--no-warmup", "--",
         "tests/trace", "-p", "no:xdist",
         "-k", "ddp and not fsdp and not thunderfx"],
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
    # served: the ranks came from the bench's own fork server, which imported torch and thunder before any run,
    # and were its standby ranks, which ran the rank prologue before the run (so none is counted in it).
    pid = result["served_fork_server"]["pid"]
    assert served["fork_servers"] == 0, result["startup"]
    assert served["standby"] == served["processes"], result["startup"]
    assert "import thunder" not in served["seconds"], result["startup"]
    standby = result["served_fork_server"]["standby_status"]
    assert standby["taken"] == served["processes"] and standby["failed"] is None, result["served_fork_server"]  # no warm-up run
    assert f"the fork server of python -m teparity bench, pid {pid}," in result["launch"]["served"], result["launch"]
    assert "one fork server for the run" in result["launch"]["forked"], result["launch"]
    # How long the imports took is the bench's output, not this test's: on a loaded machine any ordering of two
    # timings can flip, and a check that fails with the load teaches users to ignore it.
    assert "rank processes and 1 fork servers started" in completed.stderr


def test_the_reference_modes_run_served_with_a_store_emptied_before_stored_and_filled_before_reused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stored`` and ``reused`` are served runs with ``--teparity-reference-store`` (the other modes keep none): stored
    from an empty store, reused from a filled one (an untimed run fills it where no run before did)."""
    runs: list[tuple[str, list[str]]] = []

    def run_gate(paths: list[str], workdir: Path, mutation: Any, args: list[str], *, name: str, env: Any) -> Any:
        runs.append((name, args))
        store = next((arg.split("=", 1)[1] for arg in args if arg.startswith("--teparity-reference-store=")), "none")
        if store != "none":
            Path(store).mkdir(exist_ok=True)
            (Path(store) / f"{name}.pickle").write_text("a record")
        return SimpleNamespace(returncode=0, report={})

    monkeypatch.setattr(gate_runs, "run_gate", run_gate)
    modes = benching._ModeRuns(["tests/trace"], tmp_path, None, 0, progress=lambda line: None)
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "old.pickle").write_text("an earlier run's record")
    for mode in ("reused", "stored", "served"):
        modes.ready(mode, mode)
        modes.run(mode, mode)
    store = f"--teparity-reference-store={tmp_path / 'references'}"
    assert runs == [("reused", ["--teparity-ranks=forked", store]), ("stored", ["--teparity-ranks=forked", store]),
                    ("served", ["--teparity-ranks=forked", "--teparity-reference-store=none"])], runs
    runs.clear()
    shutil.rmtree(tmp_path / "references")
    modes.ready("reused", "reused")
    assert [name for name, _ in runs] == ["reused-fill"], runs
