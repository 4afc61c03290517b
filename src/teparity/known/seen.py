"""The newest thunder and TE on which a committed run showed each known defect: derived from the parity reports under
docs/results/ (a test known as the entry; where none is, the reports of the entry's ``seen`` runs), never kept by
hand. A stack newer than these holds the entry by extrapolation, which the header and the report say
(``teparity.known.registry.extrapolated``).

``seen.json`` beside this module is the derivation as of the committed reports (an installed teparity has no
docs/results/): ``python -m teparity known-defects --write-seen`` writes it, and a harness test checks it is current."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

SEEN_FILE = Path(__file__).with_name("seen.json")
Seen = dict[str, tuple[str | None, str | None]]


@functools.cache
def newest_seen() -> Seen:
    """Per entry id, (newest thunder, newest TE) that a committed run showed it on."""
    return {entry: (thunder, te) for entry, (thunder, te) in json.loads(SEEN_FILE.read_text()).items()}


def derive(root: Path, entries: Any) -> Seen:
    """``newest_seen`` computed from the reports under ``root``/docs/results for ``entries``."""
    from packaging.version import Version

    def newer(a: str | None, b: str | None) -> str | None:
        return b if a is None else a if b is None else max(a, b, key=Version)

    from teparity.reportfile import is_parity_report, json_files, read_json

    reports = []
    for path in json_files(root / "docs" / "results"):
        try:
            data = read_json(path)
        except (OSError, EOFError, ValueError):
            continue
        if is_parity_report(data):
            reports.append((path.relative_to(root).as_posix(), data))
    newest: Seen = {}

    def see(entry_id: str, data: dict[str, Any]) -> None:
        versions = data["environment"].get("versions", {})
        thunder, te = newest.get(entry_id, (None, None))
        newest[entry_id] = (newer(thunder, versions.get("thunder")), newer(te, versions.get("transformer_engine")))

    for _, data in reports:
        for entry_id in {t.get("known_defect") for r in data["results"] for t in r["tests"] if t["outcome"] in ("known", "xfail")}:
            if entry_id:
                see(entry_id, data)
    for entry in entries:
        if entry.id not in newest:
            for path, data in reports:
                if any(path.startswith(seen + "/") for seen in entry.seen):
                    see(entry.id, data)
    return {entry.id: newest.get(entry.id, (None, None)) for entry in entries}


def write(root: Path, entries: Any) -> Path:
    SEEN_FILE.write_text(json.dumps(derive(root, entries), indent=1, sort_keys=True) + "\n")
    newest_seen.cache_clear()
    return SEEN_FILE
