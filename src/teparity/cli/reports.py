"""The commands that read parity reports: ``matrix`` (reports merged into a markdown compatibility table),
``durations`` (the expected test durations that order a run under ``-n``), ``diff`` (what two runs judged
differently), ``summary`` (a report as markdown for a CI job), and the registry and catalog as markdown."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from teparity.tools.matrix import compatibility_matrix
from teparity.tools.ranges import Axis, Run
from teparity.report.parity import NotAReport, ParityReport, read_report


def _reports(command: str, paths: list[Path]) -> list[ParityReport] | None:
    """Each path's report; None after saying, on one line, which file is not one and why (the caller exits 2)."""
    reports = []
    for path in paths:
        try:
            reports.append(read_report(path))
        except NotAReport as error:
            print(f"python -m teparity {command}: {path}: {error}", file=sys.stderr)
            return None
    return reports


def matrix(paths: list[Path], output: Path | None, axis: Axis = "te") -> int:
    if (reports := _reports("matrix", paths)) is None:
        return 2
    # With an output file, each report is linked relative to where the table is written.
    runs = [Run(_source(path), os.path.relpath(path, output.parent) if output is not None else str(path), report)
            for path, report in zip(paths, reports)]
    table = compatibility_matrix(runs, axis) + "\n"
    if output is None:
        sys.stdout.write(table)
    else:
        output.write_text(table)
    return 0


def durations(paths: list[Path], output: Path | None) -> int:
    """Each test's longest duration over the reports' timelines, in seconds (a test run on several stacks
    is expected to take its longest)."""
    if (reports := _reports("durations", paths)) is None:
        return 2
    longest: dict[str, float] = {}
    for path, report in zip(paths, reports):
        if not report.timeline:
            print(f"python -m teparity durations: {path}: no timeline (a report written before teparity kept one)", file=sys.stderr)
            return 2
        for test in report.timeline["tests"]:
            longest[test["nodeid"]] = max(longest.get(test["nodeid"], 0.0), round(test["duration_s"], 1))
    text = json.dumps(dict(sorted(longest.items())), indent=0) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)
    return 0


def diff(before: Path, after: Path, *, numbers: bool = False) -> int:
    """The tests two reports judged differently (``teparity.report.relative.diff``), regressed first; with ``numbers``
    also those whose numbers moved. Exit 1 where a test regressed (what the gate, run against ``before`` as its base,
    would call red by the change), else 0."""
    from teparity.report.relative import diff as verdict_diff

    if (reports := _reports("diff", [before, after])) is None:
        return 2
    found = verdict_diff(*reports)
    for line in found.lines(numbers=numbers):
        print(line)
    counts = {"regressed": found.regressed, "fixed": found.fixed, "changed": found.changed,
              "explained by the other versions": found.explained, "new": found.new,
              "removed": found.removed} | ({"with numbers moved": found.moved} if numbers else {})
    print(", ".join(f"{len(tests)} {what}" for what, tests in counts.items()) + f" between {before} and {after}")
    return 1 if found.regressed else 0


def _source(path: Path) -> str:
    """The run a report came from: its folder, and its file name where a folder holds several."""
    name = path.name.removesuffix(".gz").removesuffix(".json")
    return path.parent.name if name == "parity-report" else f"{path.parent.name}/{name}"


def known_defects(*, write_seen: bool = False) -> int:
    """The registry as markdown; ``write_seen``: its newest-seen stacks derived from the checkout's docs/results/
    instead (``teparity.known.seen``)."""
    from teparity.known import seen
    from teparity.known.registry import REGISTRY, markdown

    if write_seen:
        root = Path(__file__).resolve().parents[3]
        if not (root / "docs" / "results").is_dir():
            print(f"python -m teparity known-defects --write-seen: no docs/results/ in {root}: run it in a teparity "
                  "checkout", file=sys.stderr)
            return 2
        sys.stderr.write(f"wrote {seen.write(root, REGISTRY)}\n")
        return 0
    sys.stdout.write(markdown())
    return 0


def repro(entry_id: str, out: Path | None, issue: bool) -> int:
    """The entry's reproduction: written to ``out`` or printed, or run here into an upstream issue's body."""
    from teparity.known import repro as repros
    from teparity.known.registry import BY_ID
    from teparity.stack.versions import Versions
    from teparity.option_types import UsageError

    if entry_id not in BY_ID:
        raise UsageError(f"no registry entry {entry_id!r}; the entries: {', '.join(BY_ID)}")
    if issue:
        status, output = repros.run(entry_id)
        sys.stdout.write(repros.issue_body(entry_id, Versions.installed().describe(), status, output))
        return 0
    if out is None:
        sys.stdout.write(repros.script(entry_id))
    else:
        out.write_text(repros.script(entry_id))
        sys.stderr.write(f"wrote {out}: python {out}\n")
    return 0


def mutations() -> int:
    from teparity.mutations.catalog import markdown_table

    sys.stdout.write(markdown_table())
    return 0


def summary(path: Path, exit_status: int | str | None, failed_step: str | None = None, base: Path | None = None) -> int:
    """A report as markdown on stdout (a CI step appends it to ``$GITHUB_STEP_SUMMARY``), red where the gate did not
    run (``exit_status`` empty, or a step before it failed: the report at ``path`` is not this run's). A report that
    is missing or not one is a usage error (exit 2), and the markdown still says red, for the job summary."""
    from teparity.cli.parser import GATE_DID_NOT_RUN
    from teparity.tools.summary import gate_not_run, markdown_summary, missing_report

    if failed_step or exit_status == GATE_DID_NOT_RUN:
        sys.stdout.write(gate_not_run(failed_step))
        return 0
    status = exit_status if isinstance(exit_status, int) else None
    try:
        report = read_report(path)
    except NotAReport as error:
        blamed, why = (base, base_error) if base is not None and (base_error := _unreadable(base)) else (path, str(error))
        sys.stdout.write(missing_report(str(blamed), why, status, is_base=blamed is base))
        print(f"python -m teparity summary: {blamed}: {why}", file=sys.stderr)
        return 2
    sys.stdout.write(markdown_summary(report, status))
    return 0


def _unreadable(path: Path) -> str | None:
    """Why ``path`` is no parity report, or None where it is one."""
    try:
        read_report(path)
    except NotAReport as error:
        return str(error)
    return None


def repro_command(entry_id: str | None, out: Path | None, issue: bool, run_all: bool, jobs: int | None,
                  json_path: Path | None, timeout_s: float | None) -> int:
    """``repro ID`` (``repro``) or ``repro --all``; a mix of the two is a ``UsageError``."""
    from teparity.option_types import UsageError
    from teparity.tools.repro_table import DEFAULT_TIMEOUT_S, run_all_here

    if run_all and entry_id is not None:
        raise UsageError(f"--all runs every reproduction: name no ID with it (got {entry_id!r})")
    if run_all and (out is not None or issue):
        raise UsageError("--out and --issue are for one entry's reproduction, not --all")
    if not run_all and (jobs is not None or json_path is not None or timeout_s is not None):
        raise UsageError("--jobs, --json and --timeout-s go with --all")
    if not run_all and entry_id is None:
        raise UsageError("name a registry entry's ID, or --all to run every reproduction here")
    if not run_all:
        return repro(entry_id, out, issue)
    run_all_here(jobs or 1, json_path, DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s)
    return 0


def repro_table_command(repro_paths: list[Path], gate_paths: list[Path], out: Path | None) -> int:
    """``python -m teparity repro-table``: exit 0 where every entry x stack agrees, 1 where one disagrees, 2 where an
    input is not what it should be."""
    from teparity.tools.repro_table import NotAReproRun, join, markdown, read_repro_run

    runs, reports = [], []
    try:
        for path in repro_paths:
            runs.append(read_repro_run(path))
        for path in gate_paths:
            reports.append(read_report(path))
    except (NotAReproRun, NotAReport) as error:
        print(f"python -m teparity repro-table: {path}: {error}", file=sys.stderr)
        return 2
    stacks, entries, joins = join(runs, reports)
    text = markdown(stacks, entries, joins)
    disagree = sum(not found.agrees for found in joins.values())
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        print(f"{len(joins) - disagree} of {len(joins)} entry x stack agree, {disagree} disagree: {out}")
    return 1 if disagree else 0
