"""The reproductions beside the gate: ``python -m teparity repro --all`` runs every standalone reproduction here (each in
a process of its own, N at a time) into a JSON of verdicts, and ``python -m teparity repro-table`` joins such JSONs with
the parity reports of the same stacks (thunder and TE versions): per entry and stack, the reproduction's verdict beside
the gate's word for that entry's checks, and whether they agree. REPRODUCED agrees with ``known`` (a test reported the
entry, passed against a combined model holding its change, or raised where its model exposed that) or ``masked`` (in
range, another entry's defect fails its tests first), NOT REPRODUCED with ``out of range`` (the entry is not
registered for the stack) or ``masked`` (another entry's defect fails its tests first), CANNOT RUN HERE with a stack
where the gate skips tests of the entry (its skip reasons beside the reproduction's); anything else, a timeout or a
crash included, is a disagreement (exit 1)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from teparity.report.parity import NO_EXECUTOR, ParityReport
from teparity.known.defect import KnownDefect, combined
from teparity.stack.versions import Versions, parse_version
from teparity.option_types import UsageError

SCHEMA = "teparity.repro-run/1"
#: A run's verdicts beyond the script's own three (``teparity.known.repro.VERDICTS``).
TIMED_OUT = "TIMED OUT"
CRASHED = "CRASHED"
DEFAULT_TIMEOUT_S = 600.0
TAIL_CHARS = 4000
#: The gate's words for an entry on a stack.
KNOWN, NOT_SEEN, OUT_OF_RANGE = "known", "in range, not seen", "out of range"
#: In range, and its tests known as another entry's defect, which fails them first (its reproduction meets that one).
MASKED = "in range, masked by another entry"
#: What each verdict agrees with (CANNOT RUN HERE: a stack where the gate skips tests of the entry, on any range). A
#: masked entry is in range: its reproduction may show it, or meet the defect that masks it.
AGREES = {"REPRODUCED": (KNOWN, MASKED), "NOT REPRODUCED": (OUT_OF_RANGE, MASKED)}
CANNOT = "CANNOT RUN HERE"


# --- python -m teparity repro [ID | --all] ---------------------------------------------------------------------------


def run_all_here(jobs: int, json_path: Path | None, timeout_s: float,
                 entries: list[str] | None = None) -> dict[str, Any]:
    """Every available reproduction (or ``entries``), ``jobs`` at a time: a line per entry as it ends, a summary, and
    the JSON (written to ``json_path`` where given). The verdicts are data: nothing here fails on them."""
    from teparity.known import repro

    entries = repro.available() if entries is None else entries
    lock = threading.Lock()
    done: dict[str, dict[str, Any]] = {}
    started = time.monotonic()

    def one(entry_id: str) -> None:
        result = run_one(entry_id, timeout_s)
        with lock:
            done[entry_id] = result
            print(line(result), flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(one, entry_id) for entry_id in entries]:
            future.result()
    versions = Versions.installed()
    data = {"schema": SCHEMA, "versions": versions.to_json(), "python": sys.version.split()[0],
            "jobs": jobs, "timeout_s": timeout_s, "entries": [done[entry_id] for entry_id in sorted(done)]}
    counts = Counter(result["verdict"] for result in data["entries"])
    said = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    where = ""
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        where = f"; JSON: {json_path}"
    print(f"{len(entries)} reproductions on {versions.describe()} in {time.monotonic() - started:.1f} s: {said or 'none'}{where}")
    return data


def line(result: dict[str, Any]) -> str:
    return f"{result['verdict']:<15} {result['seconds']:7.1f} s  {result['entry']}: {result['last_line']}"


def run_one(entry_id: str, timeout_s: float) -> dict[str, Any]:
    """The entry's reproduction run here (``teparity.known.repro.execute``, killed whole at ``timeout_s``): exit status,
    verdict, last line, output tail."""
    from teparity.known import repro

    started = time.monotonic()
    ran = repro.execute(entry_id, timeout_s)
    seconds = round(time.monotonic() - started, 1)
    last = last_line(ran.stdout, ran.stderr)
    if ran.status is None:
        last = f"no verdict within {timeout_s:g} s" + (f"; last printed: {last}" if last else "")
    return {"entry": entry_id, "status": ran.status, "verdict": verdict_of(ran.status, last), "last_line": last,
            "seconds": seconds, "output_tail": ran.output[-TAIL_CHARS:]}


def last_line(stdout: str, stderr: str) -> str:
    """The verdict: the script's last line of output that opens with one, on one line with any lines that continue it
    (a quoted error can span several); where there is none, the last line of its errors or output."""
    from teparity.known import repro

    said = stdout.strip().splitlines()
    opens = tuple(f"{verdict}:" for verdict in repro.VERDICTS.values())
    if starts := [index for index, text in enumerate(said) if text.startswith(opens)]:
        return " ".join(text.strip() for text in said[starts[-1]:])
    return (stderr.strip().splitlines() or said or [""])[-1]


def verdict_of(status: int | None, last: str) -> str:
    """The script's verdict where its exit status and last line say the same; a timeout; else a crash."""
    from teparity.known import repro

    if status is None:
        return TIMED_OUT
    verdict = repro.VERDICTS.get(status)
    return verdict if verdict is not None and last.startswith(f"{verdict}:") else CRASHED


# --- python -m teparity repro-table ----------------------------------------------------------------------------------


class NotAReproRun(Exception):
    """A file given as --repros that is not the JSON of ``repro --all``; the message says why, in one line."""


Stack = tuple[str | None, str | None]  # thunder, TE


@dataclasses.dataclass(frozen=True)
class Join:
    """One entry on one stack: the reproduction's result, the gate's word, its details, and whether they agree."""

    entry: str
    stack: Stack
    repro: dict[str, Any]
    gate: str
    #: The gate's tests of the entry, in words (outcomes, skip reasons), or why it is out of range.
    details: str
    agrees: bool


def read_repro_run(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as error:
        raise NotAReproRun(f"cannot read it: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise NotAReproRun(f"not a teparity repro run (not JSON: {error.msg}: line {error.lineno})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise NotAReproRun(f"not a teparity repro run (schema {schema!r}, expected {SCHEMA!r}: python -m teparity repro --all --json)")
    if not isinstance(data.get("versions"), dict) or not isinstance(data.get("entries"), list):
        raise NotAReproRun("not a teparity repro run (no versions or entries)")
    for result in data["entries"]:
        if not isinstance(result, dict) or not {"entry", "verdict", "last_line"} <= set(result):
            raise NotAReproRun(f"not a teparity repro run (an entry without entry, verdict and last_line: {result!r:.80})")
    return data


def stack_of(versions: Mapping[str, Any]) -> Stack:
    return versions.get("thunder"), versions.get("transformer_engine")


def stack_name(stack: Stack) -> str:
    return f"thunder {stack[0] or 'absent'}, TE {stack[1] or 'absent'}"


def judge(entry: KnownDefect | None, entry_id: str, result: dict[str, Any], report: ParityReport,
          registry: Mapping[str, KnownDefect] | None = None) -> Join:
    """The gate's word for ``entry`` on ``report``'s stack, beside the reproduction's ``result`` there. A test judged
    against the combined model of every covering entry with a model (``gate.fixtures``) shows each whose change the
    model holds (not one that a model running every linear in torch stands in for), though its outcome names the
    entry whose signature matched first; a known test whose raise the entry's model exposed (``exposed_by``) shows it
    too."""
    versions = Versions(**{key: report.environment["versions"].get(key) for key in ("torch", "thunder", "transformer_engine")})
    stack = (versions.thunder, versions.transformer_engine)
    rows = [] if entry is None else [(check, None if executor == NO_EXECUTOR else executor, test)
                                     for (check, executor), cell in sorted(report.cells.items())
                                     if entry.names(check, None if executor == NO_EXECUTOR else executor)
                                     for test in cell.tests]
    tests = [test for _, _, test in rows]

    def modeled_with_others(check: str, executor: str | None, test: Any) -> bool:
        if entry is None or entry.model is None or test.outcome != "known" or test.modeled != "pass":
            return False
        with_models = [other for other in (registry or {}).values()
                       if other.model is not None and other.holds_for(check, executor, versions)]
        if entry not in with_models:
            return False
        model = combined([other.model for other in with_models])  # what the test was judged against
        return model is entry.model or not any(model is other.model for other in with_models)

    if any(test.outcome == "known" and (test.known_defect == entry_id or entry_id in (test.exposed_by or ())) for test in tests) \
            or any(modeled_with_others(*row) for row in rows):
        gate = KNOWN
    elif entry is not None and entry.holds_for_versions(versions):
        gate = MASKED if any(test.outcome == "known" for test in tests) else NOT_SEEN
    else:
        gate = OUT_OF_RANGE
    details = _tests_in_words(entry_id, tests)
    if entry is None:
        details = "not in the registry"
    elif gate == OUT_OF_RANGE:
        details = "; ".join(entry.excluded(versions)) + (f"; {details}" if details else "")
    verdict = result["verdict"]
    if verdict == CANNOT:
        agrees = any(test.outcome == "skip" for test in tests)
    else:
        agrees = gate in AGREES.get(verdict, ())
    return Join(entry_id, stack, result, gate, details, agrees)


def _tests_in_words(entry_id: str, tests: list) -> str:
    """The entry's tests on the stack: how many, their outcomes, and every skip reason."""
    if not tests:
        return "no test of the entry in the report"
    def outcome(test: Any) -> str:
        if test.outcome != "known" or test.known_defect == entry_id:
            return test.outcome
        exposed = " (its raise exposed by this entry's model)" if entry_id in (test.exposed_by or ()) else ""
        return f"known as {test.known_defect}{exposed}"

    outcomes = Counter(outcome(test) for test in tests)
    said = f"{len(tests)} test{'' if len(tests) == 1 else 's'}: "
    said += ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))
    skips = Counter(test.evidence for test in tests if test.outcome == "skip")
    if skips:
        said += "; skipped: " + "; ".join(f"{reason} ({count})" for reason, count in sorted(skips.items()))
    return said


def join(runs: list[dict[str, Any]], reports: list[ParityReport],
         registry: Mapping[str, KnownDefect] | None = None) -> tuple[list[Stack], list[str], dict[tuple[str, Stack], Join]]:
    """The stacks (the repro runs'), the entries, and each entry x stack's join. A repro run without a report of its
    stack, or two runs or reports of one stack, is a ``UsageError``."""
    if registry is None:
        from teparity.known.registry import BY_ID as registry
    by_stack: dict[Stack, ParityReport] = {}
    for report in reports:
        stack = stack_of(report.environment.get("versions") or {})
        if stack in by_stack:
            raise UsageError(f"two --gate reports of {stack_name(stack)}: give one per stack")
        by_stack[stack] = report
    stacks: list[Stack] = []
    joins: dict[tuple[str, Stack], Join] = {}
    for run in runs:
        stack = stack_of(run["versions"])
        if stack in stacks:
            raise UsageError(f"two --repros runs of {stack_name(stack)}: give one per stack")
        if stack not in by_stack:
            have = "; ".join(stack_name(s) for s in by_stack) or "none"
            raise UsageError(f"no --gate report of {stack_name(stack)}, where a --repros run was made (the reports' stacks: {have})")
        stacks.append(stack)
        for result in run["entries"]:
            joins[(result["entry"], stack)] = judge(registry.get(result["entry"]), result["entry"], result, by_stack[stack],
                                                    registry)
    stacks.sort(key=lambda s: (_order(s[1]), _order(s[0])))
    return stacks, sorted({entry for entry, _ in joins}), joins


def _order(version: str | None) -> tuple:
    parsed = parse_version(version or "")
    return (parsed is not None, parsed or version or "")


def markdown(stacks: list[Stack], entries: list[str], joins: dict[tuple[str, Stack], Join]) -> str:
    """Entries as rows, stacks as columns, each cell ``repro / gate`` (a disagreement in bold, numbered), then the
    notes: the gate's tests where the reproduction could not run or the gate did not see the entry, and every
    disagreement with the reproduction's last line."""
    notes: list[str] = []
    disagreements: list[Join] = []
    rows = ["| entry | " + " | ".join(stack_name(s) for s in stacks) + " |", "|---|" + "---|" * len(stacks)]
    for entry in entries:
        cells = []
        for stack in stacks:
            found = joins.get((entry, stack))
            if found is None:
                cells.append("not run")
                continue
            text = f"{found.repro['verdict']} / {found.gate}"
            if not found.agrees:
                disagreements.append(found)
                text = f"**{text}** (disagreement {len(disagreements)})"
            elif found.repro["verdict"] == CANNOT or found.gate in (NOT_SEEN, MASKED):
                notes.append(f"[{len(notes) + 1}] `{entry}` on {stack_name(stack)}: repro: {found.repro['last_line']}; "
                             f"gate: {found.details}")
                text += f" [{len(notes)}]"
            cells.append(text)
        rows.append(f"| `{entry}` | " + " | ".join(cells) + " |")
    agreeing = sum(join.agrees for join in joins.values())
    lines = ["# Reproductions beside the gate", "",
             "Each cell: the reproduction's verdict / the gate's word for the entry's checks on that stack. They agree "
             "where REPRODUCED meets known (or masked: in range, another entry's defect fails the entry's tests first), NOT "
             "REPRODUCED out of range (or masked), and CANNOT RUN HERE a stack where the gate skips tests of the entry.", "", *rows, ""]
    if notes:
        lines += [*notes, ""]
    lines.append(f"{agreeing} of {len(joins)} agree; {len(disagreements)} disagree" + (":" if disagreements else "."))
    if disagreements:
        lines.append("")
        for number, found in enumerate(disagreements, 1):
            status = found.repro.get("status")
            lines.append(f"{number}. `{found.entry}` on {stack_name(found.stack)}: repro {found.repro['verdict']} "
                         f"(exit {'-' if status is None else status}, {found.repro.get('seconds', 0):.1f} s): "
                         f"{found.repro['last_line'] or '(no output)'}; gate: {found.gate} ({found.details})")
    return "\n".join(lines) + "\n"
