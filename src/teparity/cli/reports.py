"""The commands that read parity reports: ``matrix`` (reports merged into a markdown compatibility table),
``durations`` (the expected test durations that order a run under ``-n``) and ``known-defects`` (the registry as
markdown)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from teparity.gate.matrix import compatibility_matrix
from teparity.gate.ranges import Axis, Run
from teparity.gate.report import ParityReport


def matrix(paths: list[Path], output: Path | None, axis: Axis = "te") -> int:
    runs = []
    for path in paths:
        try:
            report = ParityReport.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
            reason = error.strerror if isinstance(error, OSError) and error.strerror else f"{type(error).__name__}: {error}"
            print(f"python -m teparity matrix: {path}: {reason}", file=sys.stderr)
            return 2
        # With an output file, each report is linked relative to where the table is written.
        link = os.path.relpath(path, output.parent) if output is not None else str(path)
        runs.append(Run(_source(path), link, report))
    table = compatibility_matrix(runs, axis) + "\n"
    if output is None:
        sys.stdout.write(table)
    else:
        output.write_text(table)
    return 0


def durations(paths: list[Path], output: Path | None) -> int:
    """Each test's longest duration over the reports' timelines, in seconds (a test run on several stacks
    is expected to take its longest)."""
    longest: dict[str, float] = {}
    for path in paths:
        try:
            timeline = ParityReport.from_json(json.loads(path.read_text())).timeline
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"python -m teparity durations: {path}: {type(error).__name__}: {error}", file=sys.stderr)
            return 2
        if not timeline:
            print(f"python -m teparity durations: {path}: no timeline (a report written before teparity kept one)", file=sys.stderr)
            return 2
        for test in timeline["tests"]:
            longest[test["nodeid"]] = max(longest.get(test["nodeid"], 0.0), round(test["duration_s"], 1))
    text = json.dumps(dict(sorted(longest.items())), indent=0) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)
    return 0


def _source(path: Path) -> str:
    """The run a report came from: its folder, and its file name where a folder holds several."""
    return path.parent.name if path.stem == "parity-report" else f"{path.parent.name}/{path.stem}"


def known_defects() -> int:
    from teparity.known.registry import markdown

    sys.stdout.write(markdown())
    return 0
