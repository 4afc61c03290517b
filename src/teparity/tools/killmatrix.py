"""The kill matrix: run the gate clean, then once per applicable mutation, and say which checks killed
each mutant. It fails when the clean run fails or an applicable mutant survives.

Each run is a pytest subprocess with ``--teparity-inject NAME`` (so every process of the run, ranks
included, carries the mutation) and its own parity report, read back to name the failing checks.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teparity.mutations.catalog import CATALOG

_FAILING = ("FAIL", "XPASS")


@dataclasses.dataclass
class GateRun:
    mutation: str | None
    returncode: int
    output: str
    report: dict[str, Any]

    def failed_checks(self) -> list[str]:
        """The report rows that failed the run: a FAIL, or an XPASS (a strict xfail whose defect did not show:
        how a mutation that undoes a known defect is killed)."""
        return [f"{r['check']}/{r['executor']}" for r in self.report.get("results", []) if r["outcome"] in _FAILING]

    def tests_that(self, outcome: str) -> set[str]:
        """Node ids of the reported tests with this outcome ("pass", "FAIL", ...)."""
        return {t["nodeid"] for r in self.report.get("results", []) for t in r["tests"] if t["outcome"] == outcome}

    def failed_tests(self) -> set[str]:
        return {nodeid for outcome in _FAILING for nodeid in self.tests_that(outcome)}


def run_gate(
    paths: list[str], workdir: Path, mutation: str | None = None, pytest_args: list[str] = (), *, name: str | None = None,
    env: dict[str, str] | None = None,
) -> GateRun:
    """One pytest run of ``paths`` (with ``mutation`` injected; in ``env``, default this process's) under
    ``workdir``: its output goes to ``NAME.log`` as it runs (a run cut off keeps what it printed), its temp
    dir is ``NAME/``, and its parity report ``NAME.json`` is read back (NAME: ``name``, else the mutation,
    else "clean")."""
    name = name or mutation or "clean"
    report_path, log_path = workdir / f"{name}.json", workdir / f"{name}.log"
    command = [
        sys.executable, "-m", "pytest", *paths, "-p", "no:cacheprovider",
        f"--basetemp={workdir / name}", f"--teparity-report={report_path}",
        *([f"--teparity-inject={mutation}"] if mutation else []), *pytest_args,
    ]
    with open(log_path, "w") as log:
        completed = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return GateRun(mutation, completed.returncode, log_path.read_text(errors="replace"), report)


def kill_matrix(
    paths: list[str], workdir: Path, pytest_args: list[str] = (), jobs: int = 1, progress: Callable[[str], None] = print,
    *, first_kill: bool = False,
) -> tuple[str, bool]:
    """Run the matrix (the clean run first, then up to ``jobs`` mutants at a time); return its table
    and whether it passed. ``progress`` hears of each run as it ends (a cut-off run keeps those lines).
    ``first_kill``: each mutant's run stops at its first failure (the clean run always runs whole), so
    a row names the check that killed it first, not every one."""
    from concurrent.futures import ThreadPoolExecutor

    from teparity.stack.envprobe import environment

    env = environment()

    def gate(name: str | None) -> GateRun:
        stop = ["--maxfail=1"] if first_kill and name else []
        run = run_gate(paths, workdir, name, ["-q", *pytest_args, *stop])
        progress(f"{name or '(clean run)'}: exit {run.returncode}, failed checks: {', '.join(run.failed_checks()) or 'none'}")
        return run

    clean = gate(None)
    passed = clean.tests_that("pass")
    ok = clean.returncode == 0 and bool(passed)
    verdict = "pass" if ok else f"FAIL (exit {clean.returncode}, {len(passed)} tests passed)"
    rows = [("(clean run)", verdict, ", ".join(clean.failed_checks()))]
    reasons = {name: mutation.unavailable_reason(env) for name, mutation in sorted(CATALOG.items())}
    applicable = [name for name, reason in reasons.items() if reason is None]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = dict(zip(applicable, pool.map(gate, applicable)))
    for name, reason in reasons.items():
        if reason is not None:
            rows.append((name, "n/a", reason))
            continue
        run = runs[name]
        killers = run.failed_checks()
        # --first-kill: xdist stops the session at the first failure and pytest exits 2 (interrupted).
        stopped = first_kill and run.returncode == 2 and "stopping after 1 failures" in run.output
        if (run.returncode == 1 or stopped) and killers:
            rows.append((name, "killed", ", ".join(killers)))
        else:
            ok = False
            verdict = "SURVIVED" if run.returncode == 0 else f"ERROR (exit {run.returncode})"
            rows.append((name, verdict, run.output.strip().splitlines()[-1] if run.output.strip() else ""))
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"{'mutation'.ljust(widths[0])}  {'verdict'.ljust(widths[1])}  killed by / why"]
    lines += [f"{m.ljust(widths[0])}  {v.ljust(widths[1])}  {w}" for m, v, w in rows]
    return "\n".join(lines), ok
