"""The files a process imported, each stamped with its modification time and size: a fork server, and each of
its standby ranks, forks or runs code that is still installed only where none of them changed since."""

from __future__ import annotations

import os
import sys

#: How many changed files a hello names (it counts them all).
CHANGED_NAMED = 5


Stamp = tuple[int, int]


def _stamp(path: str) -> Stamp | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def imported_files() -> dict[str, Stamp | None]:
    """Every file this process imported a module from, with its modification time and size."""
    files = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
    return {path: _stamp(path) for path in files if isinstance(path, str)}


def changed_files(stamps: dict[str, Stamp | None]) -> tuple[int, list[str]]:
    """How many of ``stamps``'s files changed (or went) since they were stamped, and the first few."""
    changed = sorted(path for path, stamp in stamps.items() if _stamp(path) != stamp)
    return len(changed), changed[:CHANGED_NAMED]
