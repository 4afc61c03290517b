"""Which commit of a source tree an installed package holds: a build is named by the files it installed, never by
where its source tree's HEAD stands when the gate runs (a tree checked out elsewhere since, or installed with
uncommitted changes, would be named by a commit whose code did not run).

Each installed file (the distribution's RECORD lists them) is hashed as git hashes a blob and compared with the tree's
commits: HEAD first, then the newest commits of every ref. Where one holds exactly the installed files, that commit is
the build's; where none does, the build is a working tree with changes on top of HEAD."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
from pathlib import Path
from typing import Any

#: How many of the tree's newest commits are tried after HEAD (a tree checked out elsewhere after the install).
COMMITS_TRIED = 200


@dataclasses.dataclass(frozen=True)
class TreeState:
    """The commit an install holds, its committer date, and whether the installed files are exactly that commit's."""

    commit: str
    date: str | None
    clean: bool

    def words(self, what: str) -> str:
        """``a source tree at 1a2b3c4d5e6f`` or ``a working tree with changes on top of 1a2b3c4d5e6f``."""
        return f"{what} at {self.commit[:12]}" if self.clean else f"a working tree with changes on top of {self.commit[:12]}"


def git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, timeout=60, check=True).stdout


def blob_hash(data: bytes) -> str:
    """The object id git gives a file of these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def installed_blobs(dist: Any) -> dict[str, str]:
    """Each installed source file of the distribution's packages (RECORD; ``.py`` files, metadata and byte code
    aside), by its path inside the site folder, with its git object id as it is on disk now."""
    blobs = {}
    for file in dist.files or ():
        if file.suffix != ".py" or ".dist-info" in file.parts[0] or file.parts[0] == "..":
            continue
        path = Path(str(dist.locate_file(file)))
        if path.is_file():
            blobs[file.as_posix()] = blob_hash(path.read_bytes())
    return blobs


def tree_blobs(tree: Path, commit: str, prefix: str) -> dict[str, str]:
    """The object ids of a commit's files under ``prefix`` (the folder that holds the installed packages), by their
    path below it."""
    listed = git(tree, "ls-tree", "-r", commit, "--", prefix or ".").splitlines()
    found = {}
    for line in listed:
        meta, path = line.split("\t", 1)
        found[path.removeprefix(prefix).lstrip("/")] = meta.split()[2]
    return found


def _prefix(tree: Path, installed: dict[str, str]) -> str | None:
    """Where in the tree the installed packages lie: its root (``thunder/``) or ``src/`` (a src layout)."""
    first = next(iter(sorted(installed)), None)
    if first is None:
        return None
    return next((prefix for prefix in ("", "src") if (tree / prefix / first).is_file()), None)


def state(dist: Any, tree: Path) -> TreeState | None:
    """The commit of ``tree`` that ``dist``'s installed files are (``TreeState``), or None where git cannot tell."""
    installed = installed_blobs(dist)
    try:
        prefix = _prefix(tree, installed)
        if prefix is None:
            return None
        head = git(tree, "rev-parse", "HEAD").strip()
        candidates = [head, *git(tree, "rev-list", f"--max-count={COMMITS_TRIED}", "--all").split()]
        for commit in dict.fromkeys(candidates):
            held = tree_blobs(tree, commit, prefix)
            if all(held.get(path) == blob for path, blob in installed.items()):
                return TreeState(commit, _date(tree, commit), True)
        return TreeState(head, _date(tree, head), False)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def editable_state(tree: Path) -> TreeState | None:
    """An editable install runs its tree as it is: HEAD, with changes where git's tracked files differ from it."""
    try:
        head = git(tree, "rev-parse", "HEAD").strip()
        dirty = git(tree, "status", "--porcelain", "--untracked-files=no").strip()
        return TreeState(head, _date(tree, head), not dirty)
    except (OSError, subprocess.SubprocessError):
        return None


def _date(tree: Path, commit: str) -> str | None:
    return git(tree, "show", "-s", "--format=%cs", commit).strip() or None
