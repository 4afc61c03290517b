"""``python -m teparity repeat N -- PYTEST ARGS``: the same gate N times in a row, to find flakes.

A gate that gives another verdict, or other numbers, on an unchanged stack is a gate people stop trusting.
Every run's parity report is kept; the command lists each test whose verdict or evidence (what it compared
and how far apart the sides were, the run's own temporary paths masked) changed between runs, with the
runs that saw each version of it, and fails if any did or if the exit statuses differ. ``repeat.json``
holds each run's seconds, exit status and test count, the changed tests, and the environment. It is written
after every run, so a repeat cut off by a deadline keeps what its finished runs saw (``asked`` says how many
runs were asked for; it is not ``stable`` until all of them ran and agreed). Where the runs fork their ranks,
one fork server serves them all (``teparity.tools.served``: each run's header names it), started and waited
for before the first run, unless ``server_per_run``: each run then starts its own, as a lone run does. Each
run starts, untimed, once the server's standby ranks are ready again (``standby_wait_s``: the seconds waited).

A repeat longer than one sitting (a CI job or a lent machine has a time limit) runs in parts: ``deadline_s`` stops it
before a run that would not finish in time (the longest run so far is the guess), and ``resume`` continues
the repeat in the same workdir, judging the new runs with the old ones' reports. ``parts`` says which runs ran
in which part, on which host and when; a run on another stack (versions, GPUs, teparity commit, ranks and backend)
counts as a change (``stack_changed``).
"""

from __future__ import annotations

import datetime
import json
import socket
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from teparity.tools.bench import differing_tests, phases_line, verdicts
from teparity.tools.served import forks_ranks, ready_line, served

OWNER = "python -m teparity repeat"


#: The parts of a run's environment that make it the same stack as another run's (not the fork server's pid).
STACK_KEYS = ("versions", "gpus", "executors", "teparity_commit", "world_size", "backend", "ranks", "sides",
              "injected", "te_settings", "fork_modules")


class ResumeError(ValueError):
    """A ``resume`` with nothing to continue: no repeat.json in the workdir, other pytest arguments, a run's
    report gone, or nothing left to run (the command exits 2 with this message)."""


def repeat(count: int, pytest_args: list[str], workdir: Path, progress: Callable[[str], None] = print, *,
           server_per_run: bool = False, resume: bool = False, deadline_s: float | None = None,
           standby_ranks: int = 0) -> tuple[dict[str, Any], bool]:
    """Run the gate until ``count`` runs are done (``resume``: counting those of the repeat in ``workdir``),
    or until the next would end past ``deadline_s`` seconds from now; return repeat.json's content and
    whether every run agreed. The shared fork server keeps ``standby_ranks`` ranks forked ahead."""
    from teparity.tools.gate_runs import run_gate

    runs, parts = _resumed(count, pytest_args, workdir) if resume else ([], [])
    part = {"part": len(parts) + 1, "runs": [], "host": socket.gethostname(),
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "stopped": "running (a repeat.json that still says so was cut off)"}
    parts.append(part)
    shared = forks_ranks(pytest_args) and not server_per_run
    began = time.monotonic()
    # The runs wait for no import: each run's seconds are then alike, and so the guess at the next one's.
    with served(OWNER, workdir / "forkserver", wait=True, standby_ranks=standby_ranks) if shared else nullcontext() as server:
        fork_server = f"one for every run of a part, pid {server.pid}, started by {OWNER}" if server else "each run's own, if it forks ranks"
        if server is not None:
            part["fork_server_ready_s"] = server.ready_s
            part["standby_ranks"] = {"count": standby_ranks, "ready_s": server.standby_ready_s}
            progress(f"part {part['part']}: {ready_line(server, standby_ranks)}")
        for number in range(len(runs) + 1, count + 1):
            # Untimed, like bench's: the standby ranks that the run before took, forked and warmed again. A
            # run that shared the machine with their warm-up took 34.7 s where the one before it took 27.3 s.
            waited = server.wait_for_standby() if server is not None and standby_ranks else None
            longest = max((run["seconds"] for run in runs), default=0.0)
            if deadline_s is not None and part["runs"] and time.monotonic() - began + longest > deadline_s:
                part["stopped"] = f"deadline: run {number} would end past {deadline_s:g} s (the longest run took {longest} s)"
                progress(f"stopped before run {number}/{count}: {part['stopped']}; continue with --resume")
                break
            start = time.monotonic()
            run = run_gate(pytest_args, workdir, None, [], name=_name(number), env=server.env if server else None)
            seconds = round(time.monotonic() - start, 1)
            runs.append({"run": number, "seconds": seconds, "exitstatus": run.returncode, "report": run.report,
                         "part": part["part"], "standby_wait_s": waited})
            part["runs"] = [part["runs"][0] if part["runs"] else number, number]
            progress(f"run {number}/{count}: {seconds} s, exit {run.returncode}, {len(verdicts(run.report))} tests reported; "
                     f"{phases_line(run.report)}")
            result, stable = _judge(runs, count, pytest_args, fork_server, parts)
            # After every run, so that a repeat cut off by a deadline still says what its finished runs saw.
            (workdir / "repeat.json").write_text(json.dumps(result, indent=2) + "\n")
        else:
            part["stopped"] = "done"
    (workdir / "repeat.json").write_text(json.dumps(result, indent=2) + "\n")  # how the part stopped
    return result, stable


def _name(number: int) -> str:
    return f"run{number:02d}"


def _resumed(count: int, pytest_args: list[str], workdir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The runs and parts of the repeat in ``workdir``, each run with its parity report read back."""
    path = workdir / "repeat.json"
    if not path.exists():
        raise ResumeError(f"nothing to resume: {path} does not exist (run the repeat without --resume first)")
    previous = json.loads(path.read_text())
    if previous["pytest_args"] != pytest_args:
        raise ResumeError(f"{path} repeated other pytest arguments: {previous['pytest_args']} (now {pytest_args})")
    if len(previous["runs"]) >= count:
        raise ResumeError(f"{path} already holds {len(previous['runs'])} runs of the {count} asked for")
    runs = []
    for run in previous["runs"]:
        report = workdir / f"{_name(run['run'])}.json"
        if not report.exists():
            raise ResumeError(f"{report}, the parity report of run {run['run']}, is gone: its verdicts cannot be compared")
        runs.append(run | {"report": json.loads(report.read_text())})
    return runs, previous.get("parts") or [{"part": 1, "runs": [1, len(runs)]}]


def _stack(report: dict[str, Any]) -> dict[str, Any]:
    environment = report.get("environment", {})
    return {key: environment.get(key) for key in STACK_KEYS}


def _judge(runs: list[dict[str, Any]], count: int, pytest_args: list[str], fork_server: str,
           parts: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """repeat.json's content for the runs so far (``count`` asked for), and whether they all agreed; runs
    still to come leave it unstable."""
    reports = [run["report"] for run in runs]
    changed = {node: _versions(node, reports) for node in differing_tests(*reports)}
    stacks = [_stack(report) for report in reports]
    stack_changed = sorted(key for key in STACK_KEYS if len({json.dumps(stack[key]) for stack in stacks}) > 1)
    tests = len(verdicts(reports[0]))
    stable = (len(runs) == count and tests > 0 and not changed and not stack_changed
              and len({run["exitstatus"] for run in runs}) == 1)
    result = {
        "runs": [{key: run[key] for key in ("run", "seconds", "exitstatus")}
                 | {"tests": len(verdicts(run["report"])), "part": run.get("part", 1),
                    "standby_wait_s": run.get("standby_wait_s")} for run in runs],
        "asked": count,
        "stable": stable,
        "tests": tests,
        "changed": changed,
        "stack_changed": {key: [stack[key] for stack in stacks] for key in stack_changed},
        "parts": parts,
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
