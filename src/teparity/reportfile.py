"""How a parity report lies on disk: JSON, gzip-compressed where its name ends in ``.gz``, as the reports committed
under docs/results are (a fifteenth of the size). Read here by the report commands and by the registry's derivations."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def read_json(path: str | Path) -> Any:
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if str(path).endswith(".gz") else raw)


def json_files(folder: Path, pattern: str = "**/*") -> list[Path]:
    """The JSON files under ``folder`` whose name without its suffix matches ``pattern``, compressed or not."""
    return sorted([*folder.glob(f"{pattern}.json"), *folder.glob(f"{pattern}.json.gz")])


def is_parity_report(data: Any) -> bool:
    """A parity report of any schema version (a run's ``environment`` and ``results``), not another JSON file."""
    return isinstance(data, dict) and "results" in data and "environment" in data
