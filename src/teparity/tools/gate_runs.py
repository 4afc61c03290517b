"""The gate as a pytest subprocess: one run's output (kept as it runs), temp dir and parity report, read back.
What the kill matrix, bench, repeat and bisect each run, once per mutation, launch mode, repetition or build."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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
