"""``python -m teparity bench [pytest args]``: the same gate with fresh ranks, then warm, on one machine.

It prints both wall times and their ratio, and whether every test's verdict and evidence (what it
compared and how far apart the sides were) is identical. ``bench.json`` holds ``fresh_s``, ``warm_s``,
``ratio``, ``identical``, the tests that differ, each run's exit status and the environment. The pytest
output and parity report of each run sit beside it. A differing verdict or number fails the command.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODES = ("fresh", "warm")


def _verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """nodeid -> (outcome, evidence), with the run's own temporary paths masked."""
    return {
        test["nodeid"]: (test["outcome"], re.sub(r"rank logs: \S+", "rank logs: <dir>", test["evidence"]))
        for result in report.get("results", [])
        for test in result["tests"]
    }


def bench(pytest_args: list[str], workdir: Path, progress: Callable[[str], None] = print) -> tuple[dict[str, Any], bool]:
    """Run both modes; return bench.json's content and whether the verdicts and evidence are identical."""
    runs: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        report = workdir / f"{mode}.json"
        command = [sys.executable, "-m", "pytest", *pytest_args, "-p", "no:cacheprovider", f"--basetemp={workdir / f'tmp-{mode}'}",
                   f"--teparity-ranks={mode}", f"--teparity-report={report}"]
        start = time.monotonic()
        with open(workdir / f"{mode}.log", "w") as log:
            completed = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
        elapsed = time.monotonic() - start
        data = json.loads(report.read_text()) if report.exists() else {}
        runs[mode] = {"seconds": elapsed, "exitstatus": completed.returncode, "report": data}
        progress(f"{mode}: {elapsed:.1f} s, exit {completed.returncode}, {len(_verdicts(data))} tests reported")
    fresh, warm = (_verdicts(runs[mode]["report"]) for mode in MODES)
    differing = sorted(node for node in fresh.keys() | warm.keys() if fresh.get(node) != warm.get(node))
    identical = bool(fresh) and not differing and runs["fresh"]["exitstatus"] == runs["warm"]["exitstatus"]
    result = {
        "fresh_s": round(runs["fresh"]["seconds"], 1),
        "warm_s": round(runs["warm"]["seconds"], 1),
        "ratio": round(runs["fresh"]["seconds"] / runs["warm"]["seconds"], 2),
        "identical": identical,
        "differing_tests": differing,
        "exitstatus": {mode: runs[mode]["exitstatus"] for mode in MODES},
        "tests": len(fresh),
        "pytest_args": pytest_args,
        "environment": runs["warm"]["report"].get("environment", {}),
    }
    (workdir / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    return result, identical
