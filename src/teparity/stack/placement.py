"""A build's place in the version space: the one version every comparison of the gate reads (registry ranges, the
version facts of ``since``, the newest-seen extrapolation, skip reasons, TE gates' thunder builds).

A release or a nightly (``0.2.7.dev20260201``) is read as it is. A source build is placed by its source: thunder
installed from a checkout reports ``0.2.7.dev0`` (its ``__about__.py``), TE built from its main branch
``2.21.0.dev0+g<hash>`` (its ``VERSION.txt`` and commit), and PEP 440 orders both below every nightly and release of
their line, so a PR's thunder would read as older than the builds it follows. Such a build is read as the nightly of
its commit's date (``0.2.7.dev0`` at a commit of 2026-01-29: ``0.2.7.dev20260129``; a release with commits on top,
``0.2.6+g<hash>``: ``0.2.6.post20260129``); where nothing says when, as the newest build of its line
(``0.2.7.dev99991231``), newer than every build the registry, the facts and the seen values name. A source build is
one whose install recorded a local tree or a checkout (PEP 610 ``direct_url.json``: ``pip install [-e] DIR``,
``pip install git+URL``), whose version names a commit (``+g<hash>``), or an undated dev build (``.dev0``) whose
package lies in a git work tree; a dev build from an index, such as the published 0.2.2.dev0, is read as it is. The
commit and its date come from git: the package's tree, or the tree the install recorded."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import subprocess
from pathlib import Path

from packaging.version import InvalidVersion, Version

from teparity.stack import installed_tree

#: The dev number of a nightly is its date; a source tree's is 0 (or another small number, never a date).
_FIRST_NIGHTLY_DATE = 20000101
#: Where nothing says when a source build was made: the last date there is, newest of its line.
UNDATED = "99991231"
#: A local version segment naming a git commit: ``+g1a2b3c4`` (TE, setuptools-scm), ``+git1a2b3c4`` (torch).
_COMMIT_SEGMENT = re.compile(r"^(?:git|g)([0-9a-f]{7,40})(?:[.+]|$)")
#: The systems under test whose builds the gate places, by distribution name.
PLACED = ("torch", "lightning-thunder", "transformer_engine")


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one installed build sits: its metadata version, the version the gate reads, and why they differ."""

    distribution: str
    #: The version its metadata reports.
    installed: str
    #: The version every comparison reads (``installed`` for a release or a nightly).
    version: str
    #: The source it was placed by, in words ("a source tree at 1a2b3c4 of 2026-01-29"), or None: read as installed.
    source: str | None = None

    def words(self) -> str:
        """``lightning-thunder 0.2.7.dev0: a source tree at 1a2b3c4 of 2026-01-29, read as 0.2.7.dev20260129``."""
        if self.source is None:
            return f"{self.distribution} {self.installed}"
        return f"{self.distribution} {self.installed}: {self.source}, read as {self.version}"


def is_source_build(installed: str, recorded_tree: bool = False, in_git_tree: bool = False) -> bool:
    """A build of a source tree rather than a published release or nightly (module docstring): an install that recorded
    a local tree or a checkout, a local segment naming a git commit, or an undated dev number in a git work tree."""
    try:
        parsed = Version(installed)
    except InvalidVersion:
        return False
    undated = parsed.dev is not None and parsed.dev < _FIRST_NIGHTLY_DATE
    return recorded_tree or bool(parsed.local and _COMMIT_SEGMENT.match(parsed.local)) or (undated and in_git_tree)


def read_as(installed: str, date: str | None) -> str:
    """The version a source build of ``installed`` made on ``date`` (``YYYY-MM-DD``; None: unknown) is read as: the
    nightly of that date where it is a dev build, a post-release of that date where it is a release with commits on
    top."""
    parsed = Version(installed)
    day = date.replace("-", "") if date else UNDATED
    base = ".".join(str(part) for part in parsed.release)
    if parsed.dev is not None:
        return f"{parsed.epoch}!{base}.dev{day}" if parsed.epoch else f"{base}.dev{day}"
    return f"{parsed.public.split('+')[0]}.post{day}"


def place(distribution: str, installed: str, *, recorded_tree: bool = False, commit: str | None = None,
          date: str | None = None, what: str = "a source tree", clean: bool = True) -> Placement:
    """The placement of one build (pure: ``placed`` reads the facts from the installed package); a commit found in
    its tree makes an undated dev build a source build; ``clean=False``: the installed files are no commit's, the
    build is a working tree with changes on top of ``commit`` (placed by that commit's date)."""
    if not is_source_build(installed, recorded_tree, in_git_tree=commit is not None):
        return Placement(distribution, installed, installed)
    if commit and not clean:
        what, at = "a working tree with changes", f" on top of {commit[:12]}"
    else:
        at = f" at {commit[:12]}" if commit else ""
    when = f" of {date}" if date else ", no commit date found: the newest build of its line"
    return Placement(distribution, installed, read_as(installed, date), f"{what}{at}{when}")


@functools.cache
def placed(distribution: str) -> Placement | None:
    """The installed build of ``distribution`` placed (None where it is not installed), read from its metadata and,
    for a source build, from the git metadata of its tree."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    installed = dist.version
    try:
        parsed = Version(installed)
    except InvalidVersion:
        return Placement(distribution, installed, installed)
    recorded, tree, what = _recorded_source(dist)
    if not (recorded or parsed.local or (parsed.dev is not None and parsed.dev < _FIRST_NIGHTLY_DATE)):
        return Placement(distribution, installed, installed)  # a release or a nightly: no git to ask
    named = match.group(1) if (match := _COMMIT_SEGMENT.match(parsed.local or "")) else None
    if tree is not None and named is None and (found := _tree_state(dist, tree, editable=what.startswith("an editable"))):
        return place(distribution, installed, recorded_tree=True, commit=found.commit, date=found.date, what=what,
                     clean=found.clean)
    commit, date = _commit_and_date(tree, named) if tree else _commit_and_date(package_tree(dist), named, tracked=True)
    return place(distribution, installed, recorded_tree=recorded, commit=commit, date=date, what=what)


def _tree_state(dist: object, tree: Path, *, editable: bool) -> installed_tree.TreeState | None:
    """The commit a build installed from ``tree`` holds, by its installed files (``installed_tree``), not by where the
    tree's HEAD stands now."""
    if not tree.exists():
        return None
    return installed_tree.editable_state(tree) if editable else installed_tree.state(dist, tree)


def _recorded_source(dist: object) -> tuple[bool, Path | None, str]:
    """What the install recorded of its source (PEP 610): a local tree (editable or not) or a VCS checkout."""
    text = dist.read_text("direct_url.json")  # type: ignore[attr-defined]
    if not text:
        return False, None, "a source build"
    try:
        recorded = json.loads(text)
    except ValueError:
        return False, None, "a source build"
    url = str(recorded.get("url", ""))
    if "dir_info" in recorded:
        editable = recorded["dir_info"].get("editable", False)
        tree = Path(url.removeprefix("file://")) if url.startswith("file://") else None
        return True, tree, "an editable source tree" if editable else "a source tree"
    if "vcs_info" in recorded:
        return True, None, f"a {recorded['vcs_info'].get('vcs', 'VCS')} checkout of {url}"
    return False, None, "a source build"


def package_tree(dist: object) -> Path | None:
    """The folder of the distribution's first top-level package, where its git metadata (if any) lives."""
    for file in dist.files or ():  # type: ignore[attr-defined]
        if file.name == "__init__.py" and len(file.parts) == 2:
            return Path(str(dist.locate_file(file))).resolve().parent  # type: ignore[attr-defined]
    return None


def _commit_and_date(tree: Path | None, commit: str | None, tracked: bool = False) -> tuple[str | None, str | None]:
    """The commit (the one the version names, else the tree's HEAD) and its committer date, from git; (commit, None)
    where git cannot tell. ``tracked``: only where the tree's ``__init__.py`` is git's (a venv inside some checkout is
    no source tree of the packages installed in it)."""
    if tree is None or not tree.exists():
        return commit, None
    try:
        if tracked and not subprocess.run(["git", "-C", str(tree), "ls-files", "--", "__init__.py"], capture_output=True,
                                          text=True, timeout=30, check=True).stdout.strip():
            return commit, None
        shown = subprocess.run(["git", "-C", str(tree), "show", "-s", "--format=%H %cs", commit or "HEAD"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return commit, None
    return (shown[0], shown[1]) if len(shown) == 2 else (commit, None)
