"""The kill matrix: run the gate clean and once per applicable mutation, side by side, and say which checks killed
each mutant. It fails when the clean run fails or an applicable mutant survives.

Each run is a pytest subprocess with ``--teparity-inject NAME`` (so every process of the run, ranks
included, carries the mutation) and its own parity report, read back to name the failing checks.
``targeted``: a mutant runs first only the rows its catalog entry says kill it (``killed_by``, through
``--teparity-rows``), and the whole gate only where those did not kill it, so that a stale ``killed_by`` costs
time, never a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from teparity.mutations.catalog import CATALOG
from teparity.tools.gate_runs import GateRun, run_gate

#: The suffix of a targeted run's report, log and temp dir (``NAME.targeted.json``); ``NAME.json`` is the whole gate's.
TARGETED = ".targeted"


def kill_matrix(
    paths: list[str], workdir: Path, pytest_args: list[str] = (), jobs: int = 1, progress: Callable[[str], None] = print,
    *, first_kill: bool = False, targeted: bool = False, only: tuple[str, ...] = (),
) -> tuple[str, bool]:
    """Run the matrix (the clean run beside up to ``jobs`` mutants at a time: nothing waits on it); return its table
    and whether it passed. ``progress`` hears of each run as it ends (a cut-off run keeps those lines).
    ``first_kill``: each mutant's run stops at its first failure (the clean run always runs whole), so
    a row names the check that killed it first, not every one. ``targeted``: each mutant runs its catalog
    ``killed_by`` rows first and the whole gate only where they survive; the row says which killed it. ``only``: these
    mutations alone (every one in the catalog where empty)."""
    from concurrent.futures import ThreadPoolExecutor

    from teparity.stack.envprobe import environment

    env = environment()

    def gate(name: str | None, rows: tuple[str, ...] = ()) -> GateRun:
        stop = ["--maxfail=1"] if first_kill and name else []
        if rows:
            run = run_gate(paths, workdir, name, ["-q", *pytest_args, *stop, f"--teparity-rows={','.join(rows)}"],
                           name=f"{name}{TARGETED}")
        else:
            run = run_gate(paths, workdir, name, ["-q", *pytest_args, *stop])
        label = f"{name} (targeted: {', '.join(rows)})" if rows else name or "(clean run)"
        progress(f"{label}: exit {run.returncode}, failed checks: {', '.join(run.failed_checks()) or 'none'}")
        return run

    def killers(run: GateRun) -> list[str]:
        """The rows that killed the mutant of ``run``; none where it survived or the run broke."""
        # --first-kill: xdist stops the session at the first failure and pytest exits 2 (interrupted).
        stopped = first_kill and run.returncode == 2 and "stopping after 1 failures" in run.output
        return run.failed_checks() if run.returncode == 1 or stopped else []

    def judge(name: str) -> tuple[str, str]:
        """The mutant's verdict and its killers (or why not)."""
        declared = CATALOG[name].killed_by
        if targeted and declared and (found := killers(gate(name, declared))):
            return "killed", f"{', '.join(found)} (its killed_by)"
        run = gate(name)
        if found := killers(run):
            drift = (f" (the whole gate only: its killed_by {', '.join(declared) or '(none)'} did not kill it; catalog "
                     "drift)") if targeted else ""
            return "killed", ", ".join(found) + drift
        verdict = "SURVIVED" if run.returncode == 0 else f"ERROR (exit {run.returncode})"
        return verdict, run.output.strip().splitlines()[-1] if run.output.strip() else ""

    reasons = {name: mutation.unavailable_reason(env) for name, mutation in sorted(CATALOG.items()) if name in (only or CATALOG)}
    applicable = [name for name, reason in reasons.items() if reason is None]
    with ThreadPoolExecutor(max_workers=1) as beside, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        cleaning = beside.submit(gate, None)
        verdicts = dict(zip(applicable, pool.map(judge, applicable)))
        clean = cleaning.result()
    rows, ok = _rows(clean, reasons, verdicts)
    return _table(rows), ok


def _rows(
    clean: GateRun, reasons: dict[str, str | None], verdicts: dict[str, tuple[str, str]],
) -> tuple[list[tuple[str, str, str]], bool]:
    """The matrix's rows (the clean run's, then each mutation's: its verdict and its killers, or why not), and whether
    it passed: the clean run exited 0 with tests passed, and every applicable mutant was killed."""
    passed = clean.tests_that("pass")
    ok = clean.returncode == 0 and bool(passed)
    verdict = "pass" if ok else f"FAIL (exit {clean.returncode}, {len(passed)} tests passed)"
    rows = [("(clean run)", verdict, ", ".join(clean.failed_checks()))]
    for name, reason in reasons.items():
        if reason is not None:
            rows.append((name, "n/a", reason))
            continue
        verdict, why = verdicts[name]
        ok = ok and verdict == "killed"
        rows.append((name, verdict, why))
    return rows, ok


def _table(rows: list[tuple[str, str, str]]) -> str:
    """The rows as a table of aligned columns: mutation, verdict, killed by / why."""
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"{'mutation'.ljust(widths[0])}  {'verdict'.ljust(widths[1])}  killed by / why"]
    lines += [f"{m.ljust(widths[0])}  {v.ljust(widths[1])}  {w}" for m, v, w in rows]
    return "\n".join(lines)
