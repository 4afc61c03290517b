"""``python -m teparity repeat N -- PYTEST ARGS``: the same gate N times in a row, to find flakes.

A gate that gives another verdict, or other numbers, on an unchanged stack is a gate people stop trusting.
Every run's parity report is kept; the command lists each test whose verdict or evidence (what it compared
and how far apart the sides were, the run's own temporary paths masked) changed between runs, with the
runs that saw each version of it, and fails if any did or if the exit statuses differ. ``repeat.json``
holds each run's seconds, exit status and test count, the changed tests, and the environment. It is written
after every run, so a repeat cut off by a deadline keeps what its finished runs saw (``asked`` says how many
runs were asked for; it is not ``stable`` until all of them ran and agreed). Where the runs fork their ranks,
one fork server serves them all (``teparity.tools.served``: each run's header names it), unless
``server_per_run``: each run then starts its own, as a lone run does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from teparity.tools.bench import differing_tests, verdicts
from teparity.tools.served import forks_ranks, served

OWNER = "python -m teparity repeat"


def repeat(count: int, pytest_args: list[str], workdir: Path, progress: Callable[[str], None] = print, *,
           server_per_run: bool = False) -> tuple[dict[str, Any], bool]:
    """Run the gate ``count`` times; return repeat.json's content and whether every run agreed."""
    from teparity.tools.killmatrix import run_gate

    shared = forks_ranks(pytest_args) and not server_per_run
    runs: list[dict[str, Any]] = []
    with served(OWNER, workdir / "forkserver") if shared else nullcontext() as server:
        fork_server = f"one for every run, pid {server.pid}, started by {OWNER}" if server else "each run's own, if it forks ranks"
        for number in range(1, count + 1):
            start = time.monotonic()
            run = run_gate(pytest_args, workdir, None, [], name=f"run{number:02d}", env=server.env if server else None)
            seconds = round(time.monotonic() - start, 1)
            runs.append({"run": number, "seconds": seconds, "exitstatus": run.returncode, "report": run.report})
            progress(f"run {number}/{count}: {seconds} s, exit {run.returncode}, {len(verdicts(run.report))} tests reported")
            result, stable = _judge(runs, count, pytest_args, fork_server)
            # After every run, so that a repeat cut off by a deadline still says what its finished runs saw.
            (workdir / "repeat.json").write_text(json.dumps(result, indent=2) + "\n")
    return result, stable


def _judge(runs: list[dict[str, Any]], count: int, pytest_args: list[str], fork_server: str) -> tuple[dict[str, Any], bool]:
    """repeat.json's content for the runs so far (``count`` asked for), and whether they all agreed; runs
    still to come leave it unstable."""
    reports = [run["report"] for run in runs]
    changed = {node: _versions(node, reports) for node in differing_tests(*reports)}
    tests = len(verdicts(reports[0]))
    stable = len(runs) == count and tests > 0 and not changed and len({run["exitstatus"] for run in runs}) == 1
    result = {
        "runs": [{key: run[key] for key in ("run", "seconds", "exitstatus")} | {"tests": len(verdicts(run["report"]))}
                 for run in runs],
        "asked": count,
        "stable": stable,
        "tests": tests,
        "changed": changed,
        "pytest_args": pytest_args,
        "fork_server": fork_server,
        "environment": reports[-1].get("environment", {}),
    }
    return result, stable


def _versions(node: str, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each distinct (outcome, evidence) of one test, with the runs (numbered from 1) that saw it."""
    seen: dict[tuple[str, str] | None, list[int]] = {}
    for number, report in enumerate(reports, start=1):
        seen.setdefault(verdicts(report).get(node), []).append(number)
    return [{"runs": numbers, "outcome": verdict[0] if verdict else "absent", "evidence": verdict[1] if verdict else ""}
            for verdict, numbers in seen.items()]
