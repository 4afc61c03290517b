"""``python -m teparity bisect``: the first thunder build (or TE release) whose gate verdict differs from
an older one's, by installing each candidate over the environment and running the given tests.

The search (``search``) is a pure function over a runner callable, so the harness covers it without
installs. Its direction comes from the two endpoints' order: ``--good`` older than ``--bad`` finds the
first bad build (a regression), ``--bad`` older than ``--good`` the first good one (a fix). A build that
cannot run the tests is a SKIP, neither good nor bad, and the search tries its neighbour instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from teparity.report.parity import NO_EXECUTOR
from teparity.stack import reasons
from teparity.stack.environment import Environment
from teparity.option_types import UsageError
from teparity.tools.gate_runs import GateRun, run_gate

Verdict = Literal["good", "bad", "skip"]
PACKAGES = ("lightning-thunder", "transformer-engine")


class EndpointMismatch(RuntimeError):
    """An endpoint whose run does not show the verdict it was given as: there is nothing to bisect."""


@dataclasses.dataclass(frozen=True)
class Step:
    version: str
    verdict: Verdict
    #: Why a skip is a skip, or what a bad build failed (the failing checks).
    reason: str = ""
    #: "check/executor: evidence" of each failing cell of a bad build.
    failures: tuple[str, ...] = ()
    #: The step's parity report and pytest log, relative to the bisect's workdir.
    report: str | None = None
    log: str | None = None
    exitstatus: int | None = None


@dataclasses.dataclass(frozen=True)
class Bisection:
    """The boundary: the newest build with the older endpoint's verdict and the oldest with the newer's;
    ``undecided`` are the SKIPs between them (the change is in one of them or in ``first``)."""

    last: Step
    first: Step
    undecided: tuple[Step, ...]
    steps: tuple[Step, ...]


def build_date(version: str) -> str:
    """YYYY-MM-DD of a dev build (its version carries the date); a release's date is not known offline."""
    dev = Version(version).dev
    if dev is not None and re.fullmatch(r"20\d{6}", str(dev)):
        text = str(dev)
        return f"{text[:4]}-{text[4:6]}-{text[6:]}"
    return "unknown (a release; its date is not in its version)"


def search(versions: Sequence[str], good: str, bad: str, run: Callable[[str], Step]) -> Bisection:
    """Bisect ``versions`` (any order; sorted here by PEP 440) between ``good`` and ``bad``.

    Both endpoints run first (an endpoint that skips gives way to its neighbour toward the other one) and
    must show their verdicts, else ``EndpointMismatch``; then the middle untried build between the current
    boundary runs, a SKIP's neighbour next, until no untried build is left between them."""
    ordered = sorted(set(versions), key=Version)
    for name, version in (("--good", good), ("--bad", bad)):
        if version not in ordered:
            raise UsageError(f"{name} {version} is not among the {len(ordered)} candidate builds ({_span(ordered)})")
    if Version(good) == Version(bad):
        raise UsageError(f"--good and --bad are the same build ({good}): give one that passes and one that fails")
    steps: list[Step] = []
    runs: dict[str, Step] = {}

    def tried(version: str) -> Step:
        if version not in runs:
            runs[version] = run(version)
            steps.append(runs[version])
        return runs[version]

    def runnable(index: int, toward: int) -> tuple[int, Step]:
        """The endpoint at ``index`` or, while it skips, its nearest neighbour toward ``toward``."""
        step = tried(ordered[index])
        while step.verdict == "skip" and index != toward:
            index += 1 if toward > index else -1
            step = tried(ordered[index])
        return index, step

    old_verdict: Verdict = "good" if Version(good) < Version(bad) else "bad"
    good_index, good_step = runnable(ordered.index(good), ordered.index(bad))
    bad_index, bad_step = runnable(ordered.index(bad), good_index)
    if good_step.verdict == "skip":
        raise EndpointMismatch(f"every build from --good {good} to --bad {bad} is SKIP (none runs the tests); {good}: {runs[good].reason}")
    wrong = []
    for name, given, step in (("--good", good, good_step), ("--bad", bad, bad_step)):
        if step.verdict == name.removeprefix("--"):
            continue
        said = f"{step.verdict.upper()}" + (f": {step.reason}" if step.reason else "")
        wrong.append(f"{name} {given} is {said}" if step.version == given else (
            f"{name} {given} is SKIP: {runs[given].reason}; the nearest build toward the other end that runs the tests, "
            f"{step.version}, is {said} (no {name.removeprefix('--')} build on that side)"))
    if wrong:
        raise EndpointMismatch("; ".join(wrong))
    low, high = sorted((good_index, bad_index))
    last, first = (good_step, bad_step) if old_verdict == "good" else (bad_step, good_step)
    skipped: dict[int, Step] = {}
    while untried := [i for i in range(low + 1, high) if i not in skipped]:
        middle = (low + high) // 2
        index = min(untried, key=lambda i: (abs(i - middle), i))  # the middle, else its nearest neighbour
        step = tried(ordered[index])
        if step.verdict == "skip":
            skipped[index] = step
        elif step.verdict == old_verdict:
            low, last = index, step
        else:
            high, first = index, step
    undecided = tuple(skipped[i] for i in sorted(skipped) if low < i < high)
    return Bisection(last=last, first=first, undecided=undecided, steps=tuple(steps))


def _span(ordered: Sequence[str]) -> str:
    return f"{ordered[0]} .. {ordered[-1]}" if ordered else "none"


# -- the real runner: list, install, run the gate, judge its report ---------------------------------


def index_versions(package: str) -> list[str]:
    """Every version of ``package`` on the index pip uses (``pip index versions --pre``)."""
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package, "--pre"], capture_output=True, text=True, check=False
    )
    listed = re.search(r"^Available versions: (.+)$", completed.stdout, re.MULTILINE)
    if completed.returncode != 0 or listed is None:
        said = (completed.stderr.strip() or completed.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise UsageError(f"pip index versions {package} --pre listed no versions (exit {completed.returncode}): {said[0]}")
    return [v.strip() for v in listed.group(1).split(",")]


def _wheels(folder: Path, package: str) -> dict[str, list[Path]]:
    """The wheels of ``package`` in ``folder`` by version: its own and its parts' (TE's core and torch
    extension are distributions named ``transformer-engine-*``)."""
    found: dict[str, list[Path]] = {}
    for wheel in sorted(folder.glob("*.whl")):
        try:
            name, version, _, _ = parse_wheel_filename(wheel.name)
        except ValueError:
            continue
        if name == canonicalize_name(package) or name.startswith(f"{canonicalize_name(package)}-"):
            found.setdefault(str(version), []).append(wheel)
    return found


def wheel_versions(folder: Path, package: str) -> list[str]:
    if not folder.is_dir():
        raise UsageError(f"--wheels {folder}: not a folder")
    versions = list(_wheels(folder, package))
    if not versions:
        raise UsageError(f"--wheels {folder}: no wheel of {package} in it")
    return versions


def verdict(run: GateRun, entry: str | None = None) -> tuple[Verdict, str, tuple[str, ...]]:
    """Judge one gate run: good (exit 0 with a test that ran), bad (a FAIL or XPASS cell), or skip (the
    build could not run the tests: it does not import, no test was collected, every test skipped, no
    report, or pytest ended otherwise), with the reason and the failing cells' evidence. With ``entry``
    (a registry id) the run is judged by that defect alone (``entry_verdict``)."""
    report = run.report
    if not report:
        tail = run.output.strip().splitlines()[-1:] or ["no output"]
        return "skip", f"no parity report (pytest exit {run.returncode}): {tail[0]}", ()
    env = Environment.from_json(report["environment"])
    if broken := reasons.import_failure(env):
        missing = re.search(r"No module named '([^'.]+)", broken)
        needs = f" (needs {missing.group(1)}: install it into the environment)" if missing else ""
        return "skip", f"does not import: {broken}{needs}", ()
    if unsupported := reasons.unsupported_pair(env):
        return "skip", unsupported, ()
    tests = [t for r in report.get("results", []) for t in r["tests"]]
    if report.get("exitstatus") == 5 or not tests:
        return "skip", "no test collected", ()
    if entry is not None:
        return entry_verdict(report, entry)
    failures = tuple(
        _failure_line(r, t) for r in report["results"] if r["outcome"] in ("FAIL", "XPASS") for t in r["tests"] if t["outcome"] == r["outcome"]
    )
    if failures or report.get("exitstatus") == 1:
        cells = sorted({f.split(" ", 1)[0] for f in failures})
        return "bad", f"exit {report.get('exitstatus')}; failing: {', '.join(cells) or '(no failing check in the report)'}", failures
    if report.get("exitstatus") != 0:
        return "skip", f"pytest exit {report.get('exitstatus')} (interrupted or an internal error)", ()
    if all(t["outcome"] == "skip" for t in tests):
        return "skip", "every test skipped: " + "; ".join(sorted({t["evidence"] for t in tests})), ()
    return "good", "", ()


def _failure_line(cell: dict[str, Any], test: dict[str, Any]) -> str:
    """``check/executor OUTCOME: the first line of its evidence``, as a step records a failing test."""
    return f"{cell['check']}/{cell['executor']} {test['outcome']}: {test['evidence'].splitlines()[0] if test['evidence'] else ''}"


def entry_verdict(report: dict[str, Any], entry: str) -> tuple[Verdict, str, tuple[str, ...]]:
    """One registered defect's verdict, from the tests of the checks and executors it names: bad where one
    of them shows its signature (a known xfail of it, inside its ranges, or a near miss of it, outside
    them), good where they ran clean, skip where another failure hides whether it is there. A lower bound
    is then bisected through builds that fail for other reasons too (another defect of the same executor)."""
    from teparity.known.registry import BY_ID

    defect = BY_ID[entry]
    named = [(r, t) for r in report.get("results", []) for t in r["tests"]
             if defect.names(r["check"], None if r["executor"] == NO_EXECUTOR else r["executor"])]
    showed = [(r, t) for r, t in named if entry in (t.get("known_defect"), t.get("near_miss"))]
    if showed:
        cells = sorted({f"{r['check']}/{r['executor']}" for r, _ in showed})
        return "bad", f"{entry} showed in {len(showed)} of {len(named)} test(s): {', '.join(cells)}", tuple(
            _failure_line(r, t) for r, t in showed)
    # An XPASS of this entry is a run where its defect did not show.
    clean = [t for _, t in named if t["outcome"] == "pass" or (t["outcome"] == "XPASS" and entry in t["evidence"])]
    other = [(r, t) for r, t in named if t["outcome"] != "skip" and t not in clean]
    if other:
        said = "; ".join(_failure_line(r, t) for r, t in other[:3])
        return "skip", f"another failure hides whether {entry} is there: {said}", ()
    if not clean:
        return "skip", f"no test of {entry}'s checks ran: " + "; ".join(sorted({t["evidence"] for _, t in named})[:3]), ()
    return "good", "", ()


@dataclasses.dataclass
class Runner:
    """Install a build into ``workdir/builds/PKG-VERSION`` (once; a later bisect reuses it), put it first
    on the pytest subprocess's PYTHONPATH, run the tests with a parity report, and judge the report."""

    package: str
    pytest_args: list[str]
    workdir: Path
    wheels: Path | None = None
    progress: Callable[[str], None] = print
    #: Judge each run by this registry entry alone (``entry_verdict``).
    entry: str | None = None

    def __call__(self, version: str) -> Step:
        name = f"{self.package}-{version}"
        site = self.workdir / "builds" / name
        if error := self._install(version, site):
            step = Step(version, "skip", f"pip install failed: {error}")
        else:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
            run = run_gate([], self.workdir, pytest_args=self.pytest_args, name=name, env=env)
            outcome, reason, failures = verdict(run, self.entry)
            step = Step(version, outcome, reason, failures, f"{name}.json" if run.report else None, f"{name}.log",
                        run.report.get("exitstatus", run.returncode))
        self.progress(f"{version} ({build_date(version)}): {step.verdict.upper()}{': ' + step.reason if step.reason else ''}")
        return step

    def _install(self, version: str, site: Path) -> str | None:
        """None once ``version`` is in ``site``, else the tail of pip's error."""
        if any(site.glob("*.dist-info")):
            return None
        # From a folder: every wheel of that version (TE's core and torch extension with it), no index.
        wheels = _wheels(self.wheels, self.package)[version] if self.wheels is not None else []
        sources = [*map(str, wheels), "--no-index"] if wheels else [f"{self.package}=={version}"]
        completed = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(site), *sources],
            capture_output=True, text=True, check=False,
        )
        if completed.returncode == 0:
            return None
        lines = [line for line in completed.stderr.splitlines() if line.startswith("ERROR")] or completed.stderr.splitlines()
        return lines[-1] if lines else f"exit {completed.returncode}"


# -- the log --------------------------------------------------------------------------------------


def describe(package: str, good: str, bad: str, result: Bisection | None, error: str | None, steps: Sequence[Step],
             entry: str | None = None) -> str:
    """bisect.txt: every step, then the boundary (or why there is none)."""
    judged = f", judged by known defect {entry} alone" if entry else ""
    lines = [f"bisect of {package}: good {good}, bad {bad} ({'a regression' if Version(good) < Version(bad) else 'a fix'}{judged})", ""]
    for step in steps:
        where = f" [{step.report or step.log or 'no report'}]" if step.log or step.report else ""
        lines.append(f"{step.version} ({build_date(step.version)}): {step.verdict.upper()}{': ' + step.reason if step.reason else ''}{where}")
    lines.append("")
    if result is None:
        lines.append(f"no boundary: {error}")
        return "\n".join(lines) + "\n"
    regression = result.first.verdict == "bad"
    lines += [
        f"first {'bad' if regression else 'good'} build: {result.first.version} ({build_date(result.first.version)})",
        f"last {'good' if regression else 'bad'} build: {result.last.version} ({build_date(result.last.version)})",
    ]
    if result.undecided:
        lines.append("undecided, could not run the tests (the change may be in any of these instead): " + "; ".join(
            f"{s.version}: {s.reason}" for s in result.undecided))
    bad_step = result.first if regression else result.last
    lines += ["", f"failing checks of {bad_step.version}:", *(f"  {f}" for f in bad_step.failures or ("(none recorded)",))]
    return "\n".join(lines) + "\n"


def write_log(workdir: Path, package: str, good: str, bad: str, pytest_args: Sequence[str], steps: Sequence[Step],
              result: Bisection | None = None, error: str | None = None, entry: str | None = None) -> str:
    """Write bisect.json and bisect.txt (after every step, so a cut-off bisect keeps its steps); return the text."""
    text = describe(package, good, bad, result, error, steps, entry)
    data: dict[str, Any] = {
        "package": package, "good": good, "bad": bad, "pytest_args": list(pytest_args), "entry": entry,
        "direction": "regression" if Version(good) < Version(bad) else "fix",
        "steps": [{**dataclasses.asdict(s), "date": build_date(s.version)} for s in steps],
        "error": error,
        "result": None if result is None else {
            "first": result.first.version, "first_verdict": result.first.verdict, "first_date": build_date(result.first.version),
            "last": result.last.version, "last_verdict": result.last.verdict, "last_date": build_date(result.last.version),
            "undecided": [s.version for s in result.undecided],
        },
    }
    (workdir / "bisect.json").write_text(json.dumps(data, indent=2) + "\n")
    (workdir / "bisect.txt").write_text(text)
    return text


def valid_version(text: str) -> str:
    """An argparse type: a PEP 440 version, as given."""
    import argparse

    try:
        Version(text)
    except InvalidVersion:
        raise argparse.ArgumentTypeError(f"not a PEP 440 version: {text!r}") from None
    return text
