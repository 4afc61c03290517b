"""``python -m teparity bench [pytest args]``: the same gate with fresh ranks, then warm, on one machine.

It prints both wall times and their ratio, whether every test's verdict and evidence (what it compared
and how far apart the sides were) is identical, and where each mode's time went: how many rank
processes it started and what their start-up cost, summed from the rank logs (torch import, process
group, TE and thunder imports, CUDA init). ``bench.json`` holds ``fresh_s``, ``warm_s``, ``ratio``,
``identical``, the tests that differ, ``startup`` per mode, each run's exit status and the environment.
The pytest output and parity report of each run sit beside it. A differing verdict or number fails the
command.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODES = ("fresh", "warm")
#: The start-up lines of ``teparity.launch.rank.join_group`` and ``teparity.inrank.task.preload``.
_STARTUP_LINE = re.compile(r"^teparity (?:rank \d+ start-up|rank preload): (.+)$", re.M)
_PHASE = re.compile(r"([A-Za-z_ ]+?) (\d+(?:\.\d+)?) s(?:,|$)")


def startup(basetemp: Path) -> dict[str, Any]:
    """Rank processes a run started and their start-up seconds by phase, from the rank logs under its
    pytest temp dir ("gloo process group" and "nccl process group" count as "process group")."""
    seconds: dict[str, float] = {}
    processes = 0
    for log in basetemp.rglob("rank*.log"):
        text = log.read_text(errors="replace")
        processes += " start-up: " in text
        for line in _STARTUP_LINE.findall(text):
            for phase, value in _PHASE.findall(line.strip()):
                name = "process group" if phase.strip().endswith("process group") else phase.strip()
                seconds[name] = round(seconds.get(name, 0.0) + float(value), 2)
    return {"processes": processes, "seconds": seconds, "total_s": round(sum(seconds.values()), 1)}


def _verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """nodeid -> (outcome, evidence), with the run's own temporary paths masked."""
    return {
        test["nodeid"]: (test["outcome"], re.sub(r"rank logs: \S+", "rank logs: <dir>", test["evidence"]))
        for result in report.get("results", [])
        for test in result["tests"]
    }


def differing_tests(fresh: dict[str, Any], warm: dict[str, Any]) -> list[str]:
    """The tests whose verdict or evidence differs between two parity reports, or that only one has."""
    a, b = _verdicts(fresh), _verdicts(warm)
    return sorted(node for node in a.keys() | b.keys() if a.get(node) != b.get(node))


def bench(pytest_args: list[str], workdir: Path, progress: Callable[[str], None] = print) -> tuple[dict[str, Any], bool]:
    """Run both modes; return bench.json's content and whether the verdicts and evidence are identical."""
    from teparity.tools.killmatrix import run_gate

    runs: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        start = time.monotonic()
        run = run_gate(pytest_args, workdir, None, [f"--teparity-ranks={mode}"], name=mode)
        elapsed = time.monotonic() - start
        started = startup(workdir / mode)
        runs[mode] = {"seconds": elapsed, "exitstatus": run.returncode, "report": run.report, "startup": started}
        phases = ", ".join(f"{name} {value:.0f} s" for name, value in started["seconds"].items())
        progress(f"{mode}: {elapsed:.1f} s, exit {run.returncode}, {len(_verdicts(run.report))} tests reported; "
                 f"{started['processes']} rank processes started, {started['total_s']:.0f} s of their start-up ({phases})")
    differing = differing_tests(runs["fresh"]["report"], runs["warm"]["report"])
    fresh = _verdicts(runs["fresh"]["report"])
    identical = bool(fresh) and not differing and runs["fresh"]["exitstatus"] == runs["warm"]["exitstatus"]
    result = {
        "fresh_s": round(runs["fresh"]["seconds"], 1),
        "warm_s": round(runs["warm"]["seconds"], 1),
        "ratio": round(runs["fresh"]["seconds"] / runs["warm"]["seconds"], 2),
        "identical": identical,
        "differing_tests": differing,
        "exitstatus": {mode: runs[mode]["exitstatus"] for mode in MODES},
        "tests": len(fresh),
        "startup": {mode: runs[mode]["startup"] for mode in MODES},
        "pytest_args": pytest_args,
        "environment": runs["warm"]["report"].get("environment", {}),
    }
    (workdir / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    return result, identical
