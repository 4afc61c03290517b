"""``python -m teparity bisect``: the search over a fake runner (no installs), the verdict of a gate run
read from its report, and the command's usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from teparity.tools.bisect import (
    EndpointMismatch,
    Step,
    Verdict,
    build_date,
    search,
    verdict,
    wheel_versions,
    write_log,
)
from teparity.option_types import UsageError
from teparity.tools.gate_runs import GateRun

BUILDS = [f"0.2.0.dev202406{day:02d}" for day in range(1, 21)]  # 20 builds, deliberately listed unsorted below


def _runner(verdicts: Callable[[int], Verdict]) -> tuple[Callable[[str], Step], list[str]]:
    """A runner whose verdict is ``verdicts(position of the build)``; it records which builds it ran."""
    ran: list[str] = []

    def run(version: str) -> Step:
        ran.append(version)
        outcome = verdicts(BUILDS.index(version))
        return Step(version, outcome, "cannot run" if outcome == "skip" else "", ("bwd-sync/legacy FAIL: after",) if outcome == "bad" else ())

    return run, ran


def test_a_regression_is_found_at_its_first_bad_build_in_few_runs() -> None:
    run, ran = _runner(lambda i: "good" if i < 13 else "bad")
    result = search(list(reversed(BUILDS)), BUILDS[0], BUILDS[-1], run)
    assert (result.last.version, result.first.version) == (BUILDS[12], BUILDS[13])
    assert result.first.verdict == "bad" and not result.undecided
    assert len(ran) <= 2 + 5 and len(set(ran)) == len(ran), ran  # both ends, then log2(18) rounded up; no build twice
    assert [s.version for s in result.steps] == ran


def test_good_after_bad_finds_the_first_fixed_build() -> None:
    run, _ = _runner(lambda i: "bad" if i < 6 else "good")
    result = search(BUILDS, good=BUILDS[15], bad=BUILDS[2], run=run)
    assert (result.last.version, result.first.version) == (BUILDS[5], BUILDS[6])
    assert (result.last.verdict, result.first.verdict) == ("bad", "good")


def test_skips_in_the_middle_are_stepped_around() -> None:
    run, ran = _runner(lambda i: "skip" if 8 <= i <= 11 else ("good" if i < 10 else "bad"))
    result = search(BUILDS, BUILDS[0], BUILDS[-1], run)
    # The change lies inside the skipped stretch: the boundary is its two sides, every skip between them undecided.
    assert (result.last.version, result.first.version) == (BUILDS[7], BUILDS[12])
    assert [s.version for s in result.undecided] == BUILDS[8:12]
    assert all(s.reason == "cannot run" for s in result.undecided)


def test_a_skip_next_to_a_decided_boundary_is_not_undecided() -> None:
    run, ran = _runner(lambda i: "skip" if i == 9 else ("good" if i < 4 else "bad"))
    result = search(BUILDS, BUILDS[0], BUILDS[-1], run)
    assert (result.last.version, result.first.version) == (BUILDS[3], BUILDS[4]) and not result.undecided
    assert BUILDS[9] in ran  # the middle was tried, skipped, and its neighbour run instead
    assert BUILDS[8] in ran or BUILDS[10] in ran


def test_an_all_skip_range_leaves_every_build_between_the_endpoints_undecided() -> None:
    run, ran = _runner(lambda i: "good" if i == 0 else ("bad" if i == 5 else "skip"))
    result = search(BUILDS[:6], BUILDS[0], BUILDS[5], run)
    assert (result.last.version, result.first.version) == (BUILDS[0], BUILDS[5])
    assert [s.version for s in result.undecided] == BUILDS[1:5] and sorted(ran) == BUILDS[:6]


def test_good_equal_to_bad_or_outside_the_candidates_is_a_usage_error() -> None:
    run, ran = _runner(lambda i: "good")
    with pytest.raises(UsageError, match="same build"):
        search(BUILDS, BUILDS[3], BUILDS[3], run)
    with pytest.raises(UsageError, match=r"--bad 0.2.1 is not among the 20 candidate builds \(0.2.0.dev20240601 .. 0.2.0.dev20240620\)"):
        search(BUILDS, BUILDS[3], "0.2.1", run)
    assert ran == []


@pytest.mark.parametrize(
    ("verdicts", "said"),
    [
        (lambda i: "bad", f"--good {BUILDS[0]} is BAD"),
        (lambda i: "good", f"--bad {BUILDS[-1]} is GOOD"),
    ],
)
def test_an_endpoint_that_is_not_what_it_was_given_as_is_a_clear_error(verdicts: Callable[[int], Verdict], said: str) -> None:
    run, ran = _runner(verdicts)
    with pytest.raises(EndpointMismatch) as raised:
        search(BUILDS, BUILDS[0], BUILDS[-1], run)
    assert said in str(raised.value) and ran == [BUILDS[0], BUILDS[-1]]


def test_an_endpoint_that_skips_gives_way_to_its_nearest_neighbour_that_runs() -> None:
    run, ran = _runner(lambda i: "skip" if i < 3 or i > 17 else ("good" if i < 9 else "bad"))
    result = search(BUILDS, BUILDS[0], BUILDS[-1], run)
    assert ran[:7] == [*BUILDS[:4], BUILDS[19], BUILDS[18], BUILDS[17]]  # each end walks inward past its skips
    assert (result.last.version, result.first.version) == (BUILDS[8], BUILDS[9]) and not result.undecided


def test_no_good_build_before_the_first_that_runs_is_a_clear_error() -> None:
    """The bug from the first build that can run the tests (thunder's sync symbol and its bug came together)."""
    run, ran = _runner(lambda i: "skip" if i < 5 else "bad")
    with pytest.raises(EndpointMismatch) as raised:
        search(BUILDS, BUILDS[0], BUILDS[-1], run)
    assert (f"--good {BUILDS[0]} is SKIP: cannot run; the nearest build toward the other end that runs the tests, "
            f"{BUILDS[5]}, is BAD") in str(raised.value)
    assert ran == [*BUILDS[:6], BUILDS[-1]]


def test_a_range_where_every_build_skips_is_a_clear_error() -> None:
    run, ran = _runner(lambda i: "skip")
    with pytest.raises(EndpointMismatch, match=f"every build from --good {BUILDS[0]} to --bad {BUILDS[4]} is SKIP"):
        search(BUILDS[:5], BUILDS[0], BUILDS[4], run)
    assert ran == BUILDS[:5]


def test_dev_builds_carry_their_date_and_releases_do_not() -> None:
    assert build_date("0.2.0.dev20240609") == "2024-06-09"
    assert build_date("2.9.0").startswith("unknown") and build_date("0.2.2.dev0").startswith("unknown")


# -- the verdict of one gate run, from its parity report ---------------------------------------------


def _gate_run(results: list[tuple[str, str, str]], exitstatus: int, **environment: object) -> GateRun:
    env = {"versions": {"torch": "2.4.1", "thunder": "0.2.0.dev20240609", "transformer_engine": None}, "gpus": [],
           "executors": {}, "te_import_error": None, "thunder_import_error": None, **environment}
    cells = [{"check": c, "executor": "legacy", "outcome": o, "tests": [{"nodeid": f"t::{c}", "outcome": o, "evidence": e}]}
             for c, o, e in results]
    return GateRun(None, exitstatus, "", {"exitstatus": exitstatus, "environment": env, "results": cells})


@pytest.mark.parametrize(
    ("run", "expected", "said"),
    [
        (_gate_run([("bwd-sync-placement[1proc]", "pass", ""), ("numerics", "skip", "no TE")], 0), "good", ""),
        (_gate_run([("bwd-sync-placement[1proc]", "FAIL", "sync at 56 after the return at 55\nmore")], 1), "bad",
         "failing: bwd-sync-placement[1proc]/legacy"),
        (_gate_run([("ddp-first-step", "XPASS", "known upstream defect x")], 1), "bad", "failing: ddp-first-step/legacy"),
        (_gate_run([("bwd-sync-placement[1proc]", "FAIL", "does not import")], 1,
                   thunder_import_error="ModuleNotFoundError: No module named 'pydantic'"),
         "skip", "does not import: lightning-thunder 0.2.0.dev20240609: ModuleNotFoundError: No module named 'pydantic' (needs pydantic"),
        (_gate_run([("bwd-sync-placement[1proc]", "skip", "no te_sync_fp8_meta_bwd")], 0), "skip", "every test skipped: no te_sync_fp8_meta_bwd"),
        (_gate_run([], 5), "skip", "no test collected"),
        (GateRun(None, 4, "ERROR: file or directory not found: tests/x\n", {}), "skip", "no parity report (pytest exit 4): ERROR: file"),
    ],
    ids=["pass", "fail", "xpass", "import-error", "all-skipped", "none-collected", "no-report"],
)
def test_a_gate_run_is_good_bad_or_a_skip_with_its_reason(run: GateRun, expected: Verdict, said: str) -> None:
    outcome, reason, failures = verdict(run)
    assert outcome == expected and said in reason, (outcome, reason)
    if expected == "bad":
        assert failures and failures[0].split(": ", 1)[1] in {"sync at 56 after the return at 55", "known upstream defect x"}


_ENTRY = "functional-fp32-bias-in-fp8-gemm"  # numerics-fp32-bias, functional executor


def _entry_run(*tests: tuple[str, str, str, dict[str, str]]) -> GateRun:
    """A gate run of (check, executor, outcome, the test's known_defect / near_miss fields)."""
    run = _gate_run([], 1, versions={"torch": "2.11.0", "thunder": "0.2.3.dev20250420", "transformer_engine": "2.9.0"})
    run.report["results"] = [
        {"check": c, "executor": x, "outcome": o,
         "tests": [{"nodeid": f"t::{c}[{x}]", "outcome": o, "evidence": f"{o} of {c}", "known_defect": None, "near_miss": None, **f}]}
        for c, x, o, f in tests
    ]
    return run


@pytest.mark.parametrize(
    ("run", "expected", "said"),
    [
        (_entry_run(("numerics-fp32-bias", "functional", "known", {"known_defect": _ENTRY})), "bad", f"{_ENTRY} showed in 1 of 1"),
        (_entry_run(("numerics-fp32-bias", "functional", "FAIL", {"near_miss": _ENTRY})), "bad", "numerics-fp32-bias/functional"),
        (_entry_run(("numerics-fp32-bias", "functional", "pass", {}), ("numerics", "functional", "FAIL", {})), "good", ""),
        (_entry_run(("numerics-fp32-bias", "functional", "FAIL", {})), "skip", f"another failure hides whether {_ENTRY} is there"),
        (_entry_run(("numerics-fp32-bias", "functional", "known", {"known_defect": "autocast-quantizes-bf16-copies"})), "skip",
         "another failure hides"),
        (_entry_run(("numerics-fp32-bias", "legacy", "known", {"known_defect": _ENTRY}),
                    ("numerics-fp32-bias", "functional", "skip", {})), "skip", f"no test of {_ENTRY}'s checks ran"),
        (_entry_run(("numerics-fp32-bias", "functional", "XPASS", {})), "skip", "another failure hides"),
    ],
    ids=["known", "near-miss", "clean-beside-another-failure", "other-failure", "other-entry", "not-its-executor", "xpass-of-another"],
)
def test_an_entry_bisect_judges_each_build_by_that_defect_alone(run: GateRun, expected: Verdict, said: str) -> None:
    outcome, reason, failures = verdict(run, _ENTRY)
    assert outcome == expected and said in reason, (outcome, reason)
    assert bool(failures) == (expected == "bad")
    if any(r["outcome"] in ("FAIL", "XPASS") for r in run.report["results"]):
        assert verdict(run)[0] == "bad"  # judged as a whole, a run that failed anything is bad


def test_an_xpass_of_the_entry_is_a_build_without_its_defect() -> None:
    run = _entry_run(("numerics-fp32-bias", "functional", "XPASS", {}))
    run.report["results"][0]["tests"][0]["evidence"] = f"known upstream defect {_ENTRY}: ..."
    assert verdict(run, _ENTRY)[0] == "good"


def test_the_log_records_every_step_and_the_boundary(tmp_path: Path) -> None:
    run, _ = _runner(lambda i: "good" if i < 3 else "bad")
    result = search(BUILDS[:8], BUILDS[0], BUILDS[7], run)
    text = write_log(tmp_path, "lightning-thunder", BUILDS[0], BUILDS[7], ["tests/trace"], result.steps, result, entry=_ENTRY)
    data = json.loads((tmp_path / "bisect.json").read_text())
    assert data["entry"] == _ENTRY and f"judged by known defect {_ENTRY} alone" in text.splitlines()[0]
    assert data["result"]["first"] == BUILDS[3] and data["result"]["first_date"] == "2024-06-04" and data["direction"] == "regression"
    assert [s["version"] for s in data["steps"]] == [s.version for s in result.steps]
    assert f"first bad build: {BUILDS[3]} (2024-06-04)" in text and "bwd-sync/legacy FAIL: after" in text


def test_wheel_versions_lists_a_package_and_its_parts_only(tmp_path: Path) -> None:
    for name in ("transformer_engine-2.9.0-py3-none-any.whl", "transformer_engine_cu13-2.9.0-py3-none-manylinux_2_28_x86_64.whl",
                 "transformer_engine_torch-2.10.0-cp311-cp311-linux_x86_64.whl", "lightning_thunder-0.2.6-py3-none-any.whl"):
        (tmp_path / name).touch()
    assert sorted(wheel_versions(tmp_path, "transformer-engine")) == ["2.10.0", "2.9.0"]
    assert wheel_versions(tmp_path, "lightning-thunder") == ["0.2.6"]
    with pytest.raises(UsageError, match="no wheel of torch"):
        wheel_versions(tmp_path, "torch")


# -- the command: bad arguments are usage errors, not tracebacks ------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--good", "0.2.6", "--bad", "0.2.6", "--wheels", "{wheels}", "--", "tests/trace"], "same build (0.2.6)"),
        (["--good", "0.2.6", "--bad", "0.2.5"], "name the tests to run after --"),
        (["--good", "soon", "--bad", "0.2.5", "--", "tests/trace"], "argument --good: not a PEP 440 version: 'soon'"),
        (["--package", "transformer-engine", "--good", "2.9.0", "--bad", "2.10.0", "--", "tests/trace"], "pass --wheels DIR"),
        (["--good", "0.2.6", "--bad", "0.2.5", "--wheels", "{wheels}/none", "--", "tests/trace"], "not a folder"),
        (["--entry", "no-such-defect", "--good", "0.2.6", "--bad", "0.2.5", "--", "tests/trace"], "--entry no-such-defect: no such known defect"),
        (["--entry", _ENTRY, "--good", "0.2.2", "--bad", "0.2.3", "--", "tests/numerics", "--runxfail"], "leave --runxfail out"),
    ],
)
def test_bisect_refuses_bad_arguments_with_a_usage_error(tmp_path: Path, args: list[str], said: str) -> None:
    (tmp_path / "lightning_thunder-0.2.6-py3-none-any.whl").touch()
    args = [a.replace("{wheels}", str(tmp_path)) for a in args]
    completed = subprocess.run([sys.executable, "-m", "teparity", "bisect", *args], capture_output=True, text=True, check=False)
    assert completed.returncode == 2, completed
    assert "python -m teparity bisect: error: " in completed.stderr and said in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr
