"""``run-matrix``: the declared stacks (``teparity.tools.declared``) side by side on one host, each in a site folder of
its own, then the compatibility table of their reports.

Each stack's thunder build is installed (``pip install --no-deps --target``; from ``--wheels`` on an offline host)
into ``WORKDIR/site-thunder-VERSION``, which goes first on the gate's ``PYTHONPATH``, ahead of ``--te-site`` (a folder
holding the stack's TE) and of what the interpreter has. The gate then runs as ``python -m pytest`` from the
repository, its report in ``WORKDIR/STACK.json``, its output in ``WORKDIR/STACK.log``. A stack is green only where its
gate exits 0 and its report names the declared thunder, TE and torch: a stack that ran other versions than it claims,
could not be installed, or ran out of time is red, and the other stacks still run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from teparity.tools.declared import DEFAULT, Stack

#: Where the gate runs from: the checkout whose conftest loads the plugin.
REPOSITORY = DEFAULT.parent
OUTCOMES = ("pass", "known", "FAIL", "XPASS", "skip")


@dataclasses.dataclass
class StackRun:
    stack: Stack
    #: The gate's exit status; None where it never ran or was stopped.
    returncode: int | None = None
    seconds: float = 0.0
    report: str | None = None
    log: str | None = None
    #: Why the stack is red besides its exit status (no install, out of time, other versions than declared).
    problem: str | None = None
    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def green(self) -> bool:
        return self.problem is None and self.returncode == 0

    def verdict(self) -> str:
        if self.green:
            return "green"
        return f"RED: {self.problem}" if self.problem else f"RED: exit {self.returncode}"


def gate_processes(pytest_args: list[str], jobs: int, cores: int | None = None) -> list[str]:
    """``pytest_args``, with ``-n`` set to an equal share of the cores (at least 2) where the caller set none (nor turned
    xdist off)."""
    if any(arg.startswith(("-n", "--numprocesses", "no:xdist")) for arg in pytest_args):
        return list(pytest_args)
    share = max(2, (cores or os.cpu_count() or 2) // max(1, jobs))
    return ["-n", str(share), *pytest_args]


def _site_path(*folders: str | None) -> str:
    return os.pathsep.join([f for f in folders if f] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))


def _version_on(path: str, package: str) -> str | None:
    """The version of ``package`` that a child with ``PYTHONPATH=path`` finds (read from its metadata, not imported)."""
    probe = f"import importlib.metadata as m\ntry: print(m.version({package!r}))\nexcept m.PackageNotFoundError: pass"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
    return found.stdout.strip() or None


def install_thunder(stack: Stack, workdir: Path, wheels: Path | None, te_site: str | None) -> tuple[str | None, str | None]:
    """(the site folder to put first, or None where the interpreter already has this build; why it cannot be had, or None)."""
    if _version_on(_site_path(te_site), "lightning-thunder") == stack.thunder:
        return None, None
    site = workdir / f"site-thunder-{stack.thunder}"
    source = ["--no-index", "--find-links", str(wheels)] if wheels is not None else []
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--disable-pip-version-check",
               "--upgrade", "--target", str(site), *source, f"lightning-thunder=={stack.thunder}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]
        return None, f"lightning-thunder {stack.thunder} could not be installed: {last}"
    return str(site), None


def _counts(report: dict[str, Any]) -> dict[str, int]:
    counts = dict.fromkeys(OUTCOMES, 0)
    for result in report.get("results", []):
        for test in result["tests"]:
            counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
    return counts


def claimed_versions(stack: Stack, report: dict[str, Any]) -> str | None:
    """Where the report's stack is not the declared one: what ran instead (a site folder that did not shadow, a TE
    the host lacks), else None."""
    versions = report.get("environment", {}).get("versions", {})
    ran = {"thunder": versions.get("thunder"), "TE": versions.get("transformer_engine"),
           "torch": (versions.get("torch") or "").split("+")[0] or None}
    declared = {"thunder": stack.thunder, "TE": stack.te, "torch": stack.torch}
    wrong = [f"{name} {ran[name]} where {declared[name]} is declared" for name in declared if ran[name] != declared[name]]
    return "ran " + ", ".join(wrong) if wrong else None


def run_stack(stack: Stack, workdir: Path, pytest_args: list[str], *, wheels: Path | None = None, te_site: str | None = None,
              timeout_s: float | None = None) -> StackRun:
    """One stack's gate, start to report (its install included in its time)."""
    start = time.monotonic()
    run = StackRun(stack, log=str(workdir / f"{stack.name}.log"))
    site, run.problem = install_thunder(stack, workdir, wheels, te_site)
    if run.problem is None:
        report = workdir / f"{stack.name}.json"
        # The stacks of a matrix share one reference store: the eager side of a spec runs once for the builds whose
        # rank code reads thunder alike (teparity.gate.references); an option given after it names another.
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={workdir / stack.name}",
                   f"--teparity-report={report}", f"--teparity-reference-store={workdir / 'references'}", *pytest_args]
        env = {**os.environ, "PYTHONPATH": _site_path(site, te_site)}
        with open(run.log, "w") as log:
            # A session of its own: at the deadline the whole gate (its xdist workers, fork server and ranks) goes.
            child = subprocess.Popen(command, cwd=REPOSITORY, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                run.returncode = child.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                run.problem = f"stopped after {timeout_s:g} s (--timeout-s)"
        if report.exists():
            data = json.loads(report.read_text())
            run.report, run.counts = str(report), _counts(data)
            run.problem = run.problem or claimed_versions(stack, data)
        elif run.problem is None:
            run.problem = f"exit {run.returncode} without a parity report (the log says why)"
    run.seconds = round(time.monotonic() - start, 1)
    return run


def run_matrix(stacks: tuple[Stack, ...], workdir: Path, pytest_args: list[str], *, jobs: int, wheels: Path | None = None,
               te_site: str | None = None, timeout_s: float | None = None,
               progress: Callable[[str], None] = print, runner: Callable[..., StackRun] = run_stack) -> dict[str, Any]:
    """Every stack, ``jobs`` at a time, each with ``-n`` an equal share of the cores unless ``pytest_args`` set one;
    ``matrix.json`` and ``compatibility.md`` in ``workdir``. ``runner`` runs one stack (``run_stack``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    args = gate_processes(pytest_args, min(jobs, len(stacks)))
    start = time.monotonic()

    def one(stack: Stack) -> StackRun:
        run = runner(stack, workdir, args, wheels=wheels, te_site=te_site, timeout_s=timeout_s)
        progress(f"{stack.name}: {run.verdict()} in {run.seconds} s")
        return run

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = list(pool.map(one, stacks))
    wall = round(time.monotonic() - start, 1)
    summed = round(sum(run.seconds for run in runs), 1)
    result = {
        "stacks": [{**dataclasses.asdict(run), "name": run.stack.name, "green": run.green} for run in runs],
        "pytest_args": args, "jobs": jobs, "wall_s": wall, "summed_s": summed,
        "ratio": round(summed / wall, 2) if wall else None, "green": all(run.green for run in runs),
    }
    (workdir / "matrix.json").write_text(json.dumps(result, indent=2) + "\n")
    _compatibility(runs, workdir)
    return result


def _compatibility(runs: list[StackRun], workdir: Path) -> None:
    """The compatibility table of the stacks that wrote a report, by thunder build along a row."""
    from teparity.tools.matrix import compatibility_matrix
    from teparity.tools.ranges import Run
    from teparity.report.parity import ParityReport

    found = [Run(run.stack.name, Path(run.report).name, ParityReport.from_json(json.loads(Path(run.report).read_text())))
             for run in runs if run.report]
    if found:
        (workdir / "compatibility.md").write_text(compatibility_matrix(found, "thunder") + "\n")


def table(result: dict[str, Any]) -> str:
    """The matrix in a few lines: a row per stack, then the wall time, the summed stack time and their ratio."""
    lines = [f"{'stack':<28} {'seconds':>8} " + " ".join(f"{o:>5}" for o in OUTCOMES) + "  verdict"]
    for stack in result["stacks"]:
        run = StackRun(Stack(**stack["stack"]), stack["returncode"], stack["seconds"], problem=stack["problem"])
        counts = " ".join(f"{stack['counts'].get(o, 0):>5}" for o in OUTCOMES)
        lines.append(f"{stack['name']:<28} {stack['seconds']:>8} {counts}  {run.verdict()}")
    red = [stack["name"] for stack in result["stacks"] if not stack["green"]]
    lines.append(f"{len(result['stacks'])} stacks in {result['wall_s']} s, their gates {result['summed_s']} s summed "
                 f"({result['ratio']}x); " + ("teparity matrix: GREEN" if not red else f"teparity matrix: RED ({', '.join(red)})"))
    return "\n".join(lines)
