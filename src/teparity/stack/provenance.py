"""Which teparity ran: a report is evidence only together with the code that judged it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from teparity.stack.versions import installed_version

#: Names the commit where the checkout has no git metadata (a copied tree on a GPU host, say).
COMMIT_VARIABLE = "TEPARITY_COMMIT"


def teparity_commit() -> str:
    """``$TEPARITY_COMMIT``, else the git commit of this checkout (``-dirty`` with tracked changes), else
    the installed package version."""
    if named := os.environ.get(COMMIT_VARIABLE):
        return named
    here = Path(__file__).resolve().parent
    try:
        commit = _git(here, "rev-parse", "HEAD")
        dirty = _git(here, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return f"teparity {installed_version('teparity') or 'unknown'} (no git metadata)"
    return commit + ("-dirty" if dirty else "")


def _git(where: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(where), *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
