"""A build's place in the version space (``teparity.stack.placement``): a source build reads as the nightly of its
commit's date, every comparison of the gate reads that version, and the registry on a dated source tree is the registry
on that date's nightly."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from teparity.known.registry import registered_for
from teparity.stack import placement
from teparity.stack.placement import UNDATED, is_source_build, place, read_as
from teparity.stack.versions import Versions
from teparity.tools import declared
from harness import REPO

SRC = REPO / "src" / "teparity"


@pytest.mark.parametrize(("installed", "source"), [
    ("2.21.0.dev0+g1a2b3c4", True), ("0.2.6+g1a2b3c4d", True), ("2.12.0a0+git5f3e2a1", True),
    ("0.2.7.dev20260201", False), ("0.2.6", False), ("2.11.0+cu130", False), ("2.20.2", False), ("not a version", False),
    ("0.2.2.dev0", False),  # published: a weekly build of 0.2.2's file (docs/facts.md)
])
def test_a_source_build_is_one_that_no_release_or_nightly_names(installed: str, source: bool) -> None:
    assert is_source_build(installed) is source


def test_an_undated_dev_build_is_a_source_build_in_a_git_tree_or_where_the_install_recorded_one() -> None:
    assert is_source_build("0.2.7.dev0", in_git_tree=True) and is_source_build("0.2.7.dev0", recorded_tree=True)
    assert is_source_build("0.2.6", recorded_tree=True) and not is_source_build("0.2.6", in_git_tree=True)


@pytest.mark.parametrize(("installed", "date", "expected"), [
    ("0.2.7.dev0", "2026-01-29", "0.2.7.dev20260129"),
    ("2.21.0.dev0+g1a2b3c4", "2026-08-15", "2.21.0.dev20260815"),
    ("0.2.6+g1a2b3c4", "2026-01-29", "0.2.6.post20260129"),
    ("0.2.7.dev0", None, f"0.2.7.dev{UNDATED}"),
])
def test_a_source_build_reads_as_the_nightly_of_its_date(installed: str, date: str | None, expected: str) -> None:
    assert read_as(installed, date) == expected


def test_a_placement_says_how_it_was_placed() -> None:
    tree = place("lightning-thunder", "0.2.7.dev0", commit="1a2b3c4d5e6f7a8b", date="2026-01-29")
    assert tree.words() == "lightning-thunder 0.2.7.dev0: a source tree at 1a2b3c4d5e6f of 2026-01-29, read as 0.2.7.dev20260129"
    undated = place("lightning-thunder", "0.2.7.dev0", recorded_tree=True)
    assert undated.version == f"0.2.7.dev{UNDATED}" and "no commit date found: the newest build of its line" in undated.words()
    nightly = place("lightning-thunder", "0.2.7.dev20260201")
    assert nightly.version == "0.2.7.dev20260201" and nightly.source is None and nightly.words() == "lightning-thunder 0.2.7.dev20260201"


def _named_builds() -> set[str]:
    """Every thunder build a registry range, a version fact or a seen value names."""
    import re

    from teparity.known import registry as entries
    from teparity.known.seen import newest_seen
    from teparity.stack import since

    named = {build for entry in entries.REGISTRY for build in re.findall(r"\d+\.\d+(?:\.\d+)*(?:\.dev\d+)?", entry.thunder)}
    named |= {str(value) for value in vars(since).values() if type(value).__name__ == "Version"}
    return named | {thunder for thunder, _ in newest_seen().values() if thunder}


def test_an_undated_source_tree_is_newer_than_every_build_of_its_line_that_anything_names() -> None:
    """Every nightly of its release that anything names; the release itself (``<0.2.7``, say) it precedes."""
    from packaging.version import Version

    undated = Version(read_as("0.2.7.dev0", None))
    line = [build for build in _named_builds() if Version(build).release[:3] == undated.release[:3] and Version(build).is_prerelease]
    assert line and all(Version(build) < undated for build in line), sorted(line)


def _nightlies() -> list[declared.Stack]:
    return [stack for stack in declared.read() if ".dev2" in stack.thunder]


@pytest.mark.parametrize("stack", _nightlies(), ids=lambda stack: stack.name)
def test_the_registry_on_a_dated_source_tree_is_the_registry_on_that_dates_nightly(stack: declared.Stack) -> None:
    base, day = stack.thunder.split(".dev")
    tree = place("lightning-thunder", f"{base}.dev0", commit="0" * 40, date=f"{day[:4]}-{day[4:6]}-{day[6:]}")
    assert tree.version == stack.thunder
    as_tree = Versions(stack.torch, tree.version, stack.te, (tree,))
    nightly = Versions(stack.torch, stack.thunder, stack.te)
    assert registered_for(as_tree) == registered_for(nightly)


def test_unplaced_pep_440_reads_a_tree_as_older_than_every_nightly() -> None:
    """Why placement exists: raw ``0.2.7.dev0`` holds the entry fixed in 0.2.7.dev20251123, its placement does not."""
    raw = Versions("2.11.0", "0.2.7.dev0", None)
    placed = Versions("2.11.0", read_as("0.2.7.dev0", None), None)
    fixed = "symbolic-values-cannot-unpack-module-parameters"
    assert fixed in registered_for(raw) and fixed not in registered_for(placed)


def _git(tree: Path, *args: str, date: str = "2026-01-29T12:00:00+00:00") -> None:
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tree), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, env=env)


def test_an_installed_source_tree_is_placed_by_its_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package whose tree is a git checkout (its dist-info beside it, as an install on a path has it) reads as the
    nightly of its HEAD's date; without git metadata or a recorded tree it is a published dev build, read as it is."""
    site = tmp_path / "site"
    (site / "toypkg").mkdir(parents=True)
    (site / "toypkg" / "__init__.py").write_text("")
    info = site / "toy_thunder-0.2.7.dev0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-thunder\nVersion: 0.2.7.dev0\n")
    (info / "RECORD").write_text("toypkg/__init__.py,,\n")
    monkeypatch.syspath_prepend(str(site))
    placement.placed.cache_clear()
    assert placement.placed("toy-thunder").version == "0.2.7.dev0"
    _git(site, "init", "-q")
    _git(site, "add", ".")
    _git(site, "commit", "-q", "-m", "tree")
    placement.placed.cache_clear()
    found = placement.placed("toy-thunder")
    placement.placed.cache_clear()
    assert found.version == "0.2.7.dev20260129" and found.source.startswith("a source build at ") and "of 2026-01-29" in found.source


def _install_copy(tree: Path, site: Path) -> None:
    """What ``pip install TREE`` (not editable) leaves: the package's files copied, RECORD listing them, and PEP 610's
    direct_url.json naming the tree."""
    import shutil

    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(tree / "toypkg", site / "toypkg")
    info = site / "toy_thunder-0.2.7.dev0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-thunder\nVersion: 0.2.7.dev0\n")
    (info / "RECORD").write_text("".join(f"toypkg/{p.name},,\n" for p in sorted((site / "toypkg").iterdir())))
    (info / "direct_url.json").write_text('{"url": "file://%s", "dir_info": {}}' % tree)


def test_an_installed_copy_of_a_tree_is_named_by_the_commit_its_files_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pip install .`` copies the tree: the build is the commit whose files it installed, whatever the tree's HEAD is
    when the gate runs; an install with uncommitted changes is a working tree with changes on top of HEAD."""
    tree, site = tmp_path / "tree", tmp_path / "site"
    (tree / "toypkg").mkdir(parents=True)
    (tree / "toypkg" / "__init__.py").write_text("X = 1\n")
    _git(tree, "init", "-q")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "one", date="2026-01-20T12:00:00+00:00")
    (tree / "toypkg" / "__init__.py").write_text("X = 2\n")
    _git(tree, "commit", "-q", "-am", "two", date="2026-01-29T12:00:00+00:00")
    monkeypatch.syspath_prepend(str(site))

    def placed_now() -> placement.Placement:
        placement.placed.cache_clear()
        try:
            return placement.placed("toy-thunder")
        finally:
            placement.placed.cache_clear()

    _install_copy(tree, site)
    two = placed_now()
    assert two.version == "0.2.7.dev20260129" and two.source.startswith("a source tree at ") and "of 2026-01-29" in two.source
    _git(tree, "checkout", "-q", "HEAD~1")  # the tree moves on; the installed build does not
    assert placed_now() == two
    (tree / "toypkg" / "__init__.py").write_text("X = 3\n")  # installed with a change nothing committed
    _install_copy(tree, site)
    changed = placed_now()
    assert changed.source.startswith("a working tree with changes on top of ") and "of 2026-01-20" in changed.source, changed
    assert changed.version == "0.2.7.dev20260120"


#: Where a build's version may be read as its metadata says, and why: the placement itself, and teparity's own commit.
READERS = {"stack/placement.py", "stack/versions.py", "stack/provenance.py"}


def _version_reads(path: Path, root: Path = SRC) -> list[str]:
    """Calls that read an installed version (``installed_version``, ``importlib.metadata.version``, a module's
    ``__version__``) for anything but whether it is installed (``... is None``)."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        name = node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
        reads = name in ("installed_version", "version") and isinstance(node, ast.Call) and node.args and \
            isinstance(node.args[0], ast.Constant) and node.args[0].value in placement.PLACED
        reads = reads or (isinstance(node, ast.Attribute) and node.attr == "__version__")
        if not reads:
            continue
        parent = parents.get(node)
        presence = isinstance(parent, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops)
        if not presence:
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return sorted(found, key=lambda at: int(at.rsplit(":", 1)[1]))


def test_every_version_the_gate_compares_is_placed() -> None:
    """No module but the placement reads thunder's, TE's or torch's version from their metadata or modules, except to
    ask whether they are installed: every comparison (registry ranges, ``since``, the seen values, skip reasons, TE
    gates) reads ``Versions`` or ``build_version``. The known defects' reproductions are standalone scripts (torch,
    thunder and TE only) and print what they ran on."""
    modules = [path for path in sorted(SRC.rglob("*.py")) if str(path.relative_to(SRC)) not in READERS
               and "repros" not in path.parts]
    assert not [read for path in modules for read in _version_reads(path)]


def test_the_guard_sees_a_raw_read(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('import importlib.metadata\nfrom x import installed_version\n'
                      'a = installed_version("lightning-thunder") > "0.2"\nb = installed_version("torch") is None\n'
                      'c = importlib.metadata.version("transformer_engine")\nimport thunder\nd = thunder.__version__\n')
    assert _version_reads(module, tmp_path) == ["m.py:3", "m.py:5", "m.py:7"]
