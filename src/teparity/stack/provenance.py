"""Which teparity ran: a report is evidence only together with the code that judged it.

Only teparity's own checkout names a commit by its git metadata: a copy or an install inside another git work tree
(a venv inside the thunder checkout, the usual layout) lies in that tree, whose HEAD is not teparity's. An install
copied from teparity's tree (``pip install .``) is named by the commit its installed files are
(``teparity.stack.installed_tree``); anything else by its version and how it was installed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from teparity.stack import installed_tree
from teparity.stack.placement import package_tree
from teparity.stack.versions import installed_version

#: Names the commit where the checkout has no git metadata (a copied tree on a GPU host, say).
COMMIT_VARIABLE = "TEPARITY_COMMIT"
#: This package's folder.
PACKAGE = Path(__file__).resolve().parents[1]


def teparity_commit() -> str:
    """``$TEPARITY_COMMIT``; else the commit of teparity's own checkout (``-dirty`` with tracked changes); else the
    commit an install from its tree holds; else the installed version and how it was installed."""
    if named := os.environ.get(COMMIT_VARIABLE):
        return named
    if (own := _own_checkout(PACKAGE)) is not None:
        return own
    return _installed()


def _own_checkout(package: Path) -> str | None:
    """HEAD (``-dirty`` with tracked changes) where ``package`` is tracked in a checkout of teparity itself."""
    try:
        top = Path(installed_tree.git(package, "rev-parse", "--show-toplevel").strip())
        installed_tree.git(package, "ls-files", "--error-unmatch", "__init__.py")
    except (OSError, subprocess.SubprocessError):
        return None
    if not _is_teparity_tree(top) or (state := installed_tree.editable_state(top)) is None:
        return None
    return state.commit + ("" if state.clean else "-dirty")


def _is_teparity_tree(top: Path) -> bool:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads((top / "pyproject.toml").read_text()).get("project", {}).get("name") == "teparity"
    except (OSError, ValueError):
        return False


def _installed() -> str:
    """An installed teparity: the commit its files are where it was installed from a teparity tree, else its version
    and the source the install recorded."""
    import importlib.metadata

    version = installed_version("teparity") or "unknown"
    try:
        dist = importlib.metadata.distribution("teparity")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is None or package_tree(dist) != PACKAGE:
        return f"a teparity copy at {PACKAGE} (no git metadata)"
    recorded = json.loads(dist.read_text("direct_url.json") or "{}")
    url = str(recorded.get("url", ""))
    if url.startswith("file://") and (tree := Path(url.removeprefix("file://"))).is_dir() and _is_teparity_tree(tree):
        if (state := installed_tree.state(dist, tree)) is not None:
            return f"teparity {version}, installed from {state.words('a source tree')} ({tree})"
    return f"teparity {version}, installed from {url or 'a package index'} (no git metadata)"
