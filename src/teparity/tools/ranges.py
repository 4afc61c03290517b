"""The compatibility table's rows: consecutive versions whose verdicts are identical, as one span.

A row is keyed by the stack less one version, the axis: with ``te``, (thunder, torch, executor, ranks),
and TE varies along it; with ``thunder``, (torch, TE, executor, ranks), and thunder varies. Within a key,
runs are put in version order, and neighbours whose verdicts are identical join one span. A verdict is
the outcome and the known-defect ids of every check; the evidence may differ. Neighbours are the
versions that were run: a version with no report between two others does not split them, and the
span's links name exactly the reports it holds. An absent version ("-", no TE) is a key of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Literal

from packaging.version import InvalidVersion, Version

from teparity.report.parity import ParityReport

Axis = Literal["te", "thunder"]
AXES: tuple[Axis, ...] = ("te", "thunder")


@dataclasses.dataclass(frozen=True)
class Run:
    """One parity report as the table names it: a short name, where it links (None: no link)."""

    name: str
    link: str | None
    report: ParityReport

    def version(self, axis: Axis) -> str:
        return stack(self.report)[axis]


def stack(report: ParityReport) -> dict[str, str]:
    """thunder, torch, TE and ranks of a report, "-" where absent."""
    env = report.environment
    versions = env.get("versions", {})
    return {
        "thunder": versions.get("thunder") or "-",
        "torch": versions.get("torch") or "-",
        "te": versions.get("transformer_engine") or "-",
        "ranks": f"{env.get('world_size', '?')} {env.get('backend', '?')}",
    }


def version_key(text: str | None) -> tuple[int, Version | str]:
    """PEP 440 order, with anything that is not a version after every version."""
    try:
        return (0, Version(text or ""))
    except InvalidVersion:
        return (1, text or "")


def verdicts(report: ParityReport, executor: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """Per check of ``executor``: its outcome and known-defect ids, which a span's runs share."""
    return tuple(sorted(
        (check, cell.outcome, tuple(cell.known_defects())) for (check, kind), cell in report.cells.items() if kind == executor
    ))


#: The most reports a span links one by one; a longer one links its first and last (the others lie beside them).
LINKED = 3


@dataclasses.dataclass
class Span:
    """Runs of one executor, in version order along ``axis``, with identical verdicts."""

    axis: Axis
    executor: str
    runs: list[Run]

    def field(self, name: str) -> str:
        """A stack field; along the axis, the range: "2.10.0 .. 2.20.2, 11 versions"."""
        if name != self.axis:
            return stack(self.runs[0].report)[name]
        versions = list(dict.fromkeys(run.version(self.axis) for run in self.runs))
        if len(versions) == 1:
            return versions[0] if len(self.runs) == 1 else f"{versions[0]}, {len(self.runs)} reports"
        return f"{versions[0]} .. {versions[-1]}, {len(versions)} versions"

    def links(self) -> str:
        """The reports as links: a single one by its name; in a range, by its version along the axis (its name
        where two reports share a version), each of up to ``LINKED`` reports, else the first and the last."""
        if len(self.runs) == 1:
            return _link(self.runs[0].name, self.runs[0].link)
        versions = [run.version(self.axis) for run in self.runs]
        links = [_link(run.name if versions.count(version) > 1 else version, run.link) for run, version in zip(self.runs, versions)]
        return " ".join(links) if len(links) <= LINKED else f"{links[0]} .. {links[-1]}"


def _link(text: str, target: str | None) -> str:
    return f"[{text}]({target})" if target else text


def collapse(runs: Iterable[Run], axis: Axis = "te") -> list[Span]:
    """Spans by key (in the order keys first appear), each key's runs in version order along ``axis``."""
    keyed: dict[tuple[str, ...], list[Run]] = {}
    for run in runs:
        fields = stack(run.report)
        for executor in run.report.executors():
            # An absent version (no TE) is never a neighbour of a present one.
            key = (*(fields[f] for f in ("thunder", "torch", "te", "ranks") if f != axis), executor, fields[axis] == "-")
            keyed.setdefault(key, []).append(run)
    spans: list[Span] = []
    for key, members in keyed.items():
        executor = key[-2]
        previous: tuple | None = None
        for run in sorted(members, key=lambda r: version_key(r.version(axis))):
            current = verdicts(run.report, executor)
            if previous == current:
                spans[-1].runs.append(run)
            else:
                spans.append(Span(axis, executor, [run]))
            previous = current
    return spans
