"""``python -m teparity bench [pytest args]``: the same gate with fresh ranks, then warm, then forked, then
served, on one machine.

served: forked ranks from a fork server that the bench started (and waited for) before its first run, as
``python -m teparity serve`` and ``repeat`` give their runs (``teparity.tools.served``), where forked
starts the run's own; so the two differ by what a run pays for its fork server's imports. stored and reused
(``REFERENCE_MODES``): served, with a reference store, empty before stored, filled by a run before reused; the
other modes keep no reference.

It prints each mode's wall time and the ratios against fresh, whether every test's verdict and evidence
(what it compared and how far apart the sides were) is identical in every mode, and where each mode's
time went: how many rank processes (and fork servers: one per run, in the controller's temp dir, unless a
process had to start its own) it started and what their start-up cost, summed from their logs (torch
import, process group, TE and thunder imports, CUDA init), and how many processes forked ranks from them. ``bench.json`` holds
``seconds`` and ``speedup`` per mode (after an untimed warm-up run), ``identical``, the tests that
differ, ``startup`` and ``phases`` (the parity report's) per mode, each run's exit status and the environment. The pytest output and parity
report of each run sit beside it. A differing verdict or number fails the command.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from teparity.gate.timeline import describe_phases
from teparity.launch.fork_client import FORK_SERVER_VARIABLE
from teparity.tools.served import ready_line, served

MODES = ("fresh", "warm", "forked", "served")
#: Served runs with a reference store (``teparity.gate.references``): ``stored`` from an empty one (a stack's first
#: run: every reference computed and stored), ``reused`` from the one a run before filled (a second run of the stack).
REFERENCE_MODES = ("stored", "reused")
SERVED_MODES = ("served", *REFERENCE_MODES)
OWNER = "python -m teparity bench"
#: The start-up lines of ``teparity.launch.rank.join_group``, ``teparity.inrank.task.preload`` and the fork
#: server's preload (``teparity.inrank.forkable``).
_STARTUP_LINE = re.compile(r"^teparity (?:rank \d+ start-up|rank preload|fork server preload): (.+)$", re.M)
_PHASE = re.compile(r"([A-Za-z_. ]+?) (\d+(?:\.\d+)?) s(?:,|$)")
#: ``teparity.launch.forkserver``: a process that connected to the fork server to fork its ranks there.
_SERVED_LINE = re.compile(r"^teparity fork server: serving pid \d+\b", re.M)
#: ``teparity.launch.rank_pool._pool_rank_main``: a rank that was a standby of the fork server before a run took it.
_STANDBY_LINE = re.compile(r"^teparity rank: a standby rank of the fork server", re.M)
#: ``teparity.launch.outcome.task_line``: the function a rank ran and its seconds.
_TASK_LINE = re.compile(r"^teparity rank task: (\S+) (\d+(?:\.\d+)?) s$", re.M)


def startup(basetemp: Path) -> dict[str, Any]:
    """Rank processes and fork servers a run started and their start-up seconds by phase, from their logs
    under its pytest temp dir ("gloo process group" and "nccl process group" count as "process group"; a
    standby rank's imports ran before the run and are not counted: ``standby`` says how many ranks were
    standbys), and the seconds the ranks then spent in each function they ran (``tasks``, summed over ranks);
    ``fork_server_clients``: the processes that forked ranks from those servers."""
    seconds: dict[str, float] = {}
    tasks: dict[str, float] = {}
    processes = clients = standby = 0
    for log in [*basetemp.rglob("rank*.log"), *basetemp.rglob("forkserver.log")]:
        text = log.read_text(errors="replace")
        processes += " start-up: " in text
        standby += _STANDBY_LINE.search(text) is not None
        clients += len(_SERVED_LINE.findall(text))
        for line in _STARTUP_LINE.findall(text):
            for phase, value in _PHASE.findall(line.strip()):
                name = "process group" if phase.strip().endswith("process group") else phase.strip()
                seconds[name] = round(seconds.get(name, 0.0) + float(value), 2)
        for function, value in _TASK_LINE.findall(text):
            tasks[function] = round(tasks.get(function, 0.0) + float(value), 2)
    fork_servers = sum(1 for _ in basetemp.rglob("forkserver.log"))
    return {"processes": processes, "standby": standby, "fork_servers": fork_servers, "fork_server_clients": clients, "seconds": seconds,
            "total_s": round(sum(seconds.values()), 1), "tasks": tasks, "tasks_s": round(sum(tasks.values()), 1)}


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """nodeid -> (outcome, evidence), with the run's own temporary paths masked."""
    return {
        test["nodeid"]: (test["outcome"], re.sub(r"rank logs: \S+", "rank logs: <dir>", test["evidence"]))
        for result in report.get("results", [])
        for test in result["tests"]
    }


def differing_tests(*reports: dict[str, Any]) -> list[str]:
    """The tests whose verdict or evidence differs between parity reports, or that not every one has."""
    runs = [verdicts(report) for report in reports]
    nodes = set().union(*runs)
    return sorted(node for node in nodes if len({run.get(node) for run in runs}) > 1)


def report_phases(report: dict[str, Any]) -> dict[str, float]:
    """A parity report's phases (``teparity.gate.timeline``), or none where it has no timeline."""
    return (report.get("timeline") or {}).get("phases", {})


def phases_line(report: dict[str, Any]) -> str:
    """The run's phases as a line: where its seconds went beyond its tests'."""
    phases = report_phases(report)
    return describe_phases(phases) if phases else "no phases in its report"


def _without_server() -> dict[str, str]:
    """This process's environment, naming no fork server: a fresh, warm or forked run starts its own."""
    return {name: value for name, value in os.environ.items() if name != FORK_SERVER_VARIABLE}


def bench(pytest_args: list[str], workdir: Path, modes: tuple[str, ...] = MODES,
          progress: Callable[[str], None] = print, warmup: bool = True, standby_ranks: int = 0) -> tuple[dict[str, Any], bool]:
    """Run each mode; return bench.json's content and whether the verdicts and evidence are identical.
    ``warmup``: first one untimed run, so that the caches that outlive a run (the environment probe's,
    torch inductor's compiled kernels on disk) serve every timed mode alike, not only those after the first.
    The served mode's fork server keeps ``standby_ranks`` ranks forked ahead, and each served run starts
    once they are ready (``served_fork_server.standby_waits_s``: the seconds waited for them before each)."""
    with served(OWNER, workdir / "served-forkserver", wait=True, standby_ranks=standby_ranks) if set(SERVED_MODES) & set(modes) else nullcontext() as server:
        if server is not None:
            progress(f"served: {ready_line(server, standby_ranks)}")
        modes_run = _ModeRuns(pytest_args, workdir, server, standby_ranks, progress)
        if warmup:
            modes_run.warm_up(modes[-1])
        runs = {mode: modes_run.timed(mode) for mode in modes}
        standby = server.standby_status() if server is not None and standby_ranks else None
        served_server = {"pid": server.pid, "ready_s": server.ready_s, "standby_ranks": standby_ranks,
                         "standby_ready_s": server.standby_ready_s, "standby_waits_s": modes_run.standby_waits,
                         "standby_status": standby} if server else None
    result = _result(runs, modes, served_server, pytest_args, warmup)
    (workdir / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    return result, result["identical"]


class _ModeRuns:
    """The gate once per launch mode, each a pytest run of its own (``served``: forked ranks from the bench's
    fork server, its standby ranks ready before each run, untimed)."""

    def __init__(self, pytest_args: list[str], workdir: Path, server: Any, standby_ranks: int,
                 progress: Callable[[str], None]) -> None:
        self.pytest_args, self.workdir, self.server, self.standby_ranks = pytest_args, workdir, server, standby_ranks
        self.progress = progress
        self.standby_waits: dict[str, float] = {}

    def ready(self, mode: str, name: str) -> None:
        """Before a served run, untimed: its standby ranks ready (a run before it took some); before a stored run its
        store emptied, before a reused one filled (by an untimed run where none before filled it)."""
        store = self.workdir / "references"
        if mode == "stored":
            shutil.rmtree(store, ignore_errors=True)
        if mode == "reused" and not any(store.glob("*.pickle")):
            self.ready("stored", f"{name}-fill")
            self.progress(f"{name}: its store filled first (not timed), exit {self.run('stored', f'{name}-fill').returncode}")
        if mode in SERVED_MODES and self.server is not None and self.standby_ranks:
            self.standby_waits[name] = self.server.wait_for_standby()

    def run(self, mode: str, name: str) -> Any:
        from teparity.tools.gate_runs import run_gate

        ranks = "forked" if mode in SERVED_MODES else mode
        env = self.server.env if mode in SERVED_MODES and self.server else _without_server()
        store = f"--teparity-reference-store={self.workdir / 'references'}" if mode in REFERENCE_MODES else "--teparity-reference-store=none"
        return run_gate(self.pytest_args, self.workdir, None, [f"--teparity-ranks={ranks}", store], name=name, env=env)

    def warm_up(self, mode: str) -> None:
        self.ready(mode, "warmup")
        start = time.monotonic()
        run = self.run(mode, "warmup")
        self.progress(f"warm-up ({mode}, not timed): {time.monotonic() - start:.1f} s, exit {run.returncode}")

    def timed(self, mode: str) -> dict[str, Any]:
        self.ready(mode, mode)
        start = time.monotonic()
        run = self.run(mode, mode)
        elapsed = time.monotonic() - start
        started = startup(self.workdir / mode)
        phases = ", ".join(f"{name} {value:.0f} s" for name, value in started["seconds"].items())
        self.progress(f"{mode}: {elapsed:.1f} s, exit {run.returncode}, {len(verdicts(run.report))} tests reported; "
                      f"{started['processes']} rank processes and {started['fork_servers']} fork servers started "
                      f"({started['fork_server_clients']} processes forked ranks from them; {started['standby']} of the ranks "
                      f"were standbys), {started['total_s']:.0f} s of their start-up ({phases}), {started['tasks_s']:.0f} s of "
                      f"their runs; {phases_line(run.report)}")
        return {"seconds": elapsed, "exitstatus": run.returncode, "report": run.report, "startup": started,
                "launch": run.report.get("environment", {}).get("launch")}


def _result(runs: dict[str, dict[str, Any]], modes: tuple[str, ...], served_server: dict[str, Any] | None,
            pytest_args: list[str], warmup: bool) -> dict[str, Any]:
    """bench.json's content: each mode's seconds and speed-up over the first, whether every verdict and evidence
    line is identical, and where each mode's start-up went."""
    differing = differing_tests(*(run["report"] for run in runs.values()))
    first = verdicts(runs[modes[0]]["report"])
    slowest = runs[modes[0]]["seconds"]
    return {
        "seconds": {mode: round(run["seconds"], 1) for mode, run in runs.items()},
        "speedup": {mode: round(slowest / run["seconds"], 2) for mode, run in runs.items()},
        "identical": bool(first) and not differing and len({run["exitstatus"] for run in runs.values()}) == 1,
        "differing_tests": differing,
        "exitstatus": {mode: run["exitstatus"] for mode, run in runs.items()},
        "tests": len(first),
        "startup": {mode: run["startup"] for mode, run in runs.items()},
        "launch": {mode: run["launch"] for mode, run in runs.items()},
        "phases": {mode: report_phases(run["report"]) for mode, run in runs.items()},
        "served_fork_server": served_server,
        "pytest_args": pytest_args,
        "warmup": warmup,
        "environment": runs[modes[-1]]["report"].get("environment", {}),
    }
