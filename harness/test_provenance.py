"""Which teparity ran (``teparity.stack.provenance``): only teparity's own checkout names a commit by its git metadata;
a copy inside another work tree (a venv inside the thunder checkout) never reports that tree's HEAD."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from harness import REPO



def _git(tree: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(tree), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def _commit_named(site: Path) -> str:
    """teparity_commit() of the teparity package found first in ``site``, in a fresh interpreter."""
    env = {key: value for key, value in os.environ.items() if key != "TEPARITY_COMMIT"}
    env["PYTHONPATH"] = str(site)
    code = "import pathlib, teparity.stack.provenance as p; assert pathlib.Path(p.__file__).resolve().parents[2] == pathlib.Path(%r); print(p.teparity_commit())"
    done = subprocess.run([sys.executable, "-c", code % str(site)], capture_output=True, text=True, env=env, cwd=site)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_own_checkout_names_its_head() -> None:
    head = _git(REPO, "rev-parse", "HEAD")
    assert _commit_named(REPO / "src").startswith(head)


def test_a_copy_inside_another_work_tree_never_reports_that_trees_head(tmp_path: Path) -> None:
    thunder = tmp_path / "thunder"
    thunder.mkdir()
    (thunder / "pyproject.toml").write_text('[project]\nname = "lightning-thunder"\n')
    _git(thunder, "init", "-q")
    _git(thunder, "add", ".")
    _git(thunder, "commit", "-q", "-m", "thunder")
    head = _git(thunder, "rev-parse", "HEAD")
    site = thunder / ".venv" / "site-packages"  # untracked, as a venv in the checkout is
    shutil.copytree(REPO / "src" / "teparity", site / "teparity", ignore=shutil.ignore_patterns("__pycache__"))
    untracked = _commit_named(site)
    assert head not in untracked and "no git metadata" in untracked, untracked
    vendored = thunder / "vendor"  # tracked by the thunder checkout: still not teparity's commit
    shutil.copytree(site / "teparity", vendored / "teparity")
    _git(thunder, "add", ".")
    _git(thunder, "commit", "-q", "-m", "vendored")
    tracked = _commit_named(vendored)
    assert _git(thunder, "rev-parse", "HEAD") not in tracked and "no git metadata" in tracked, tracked


def test_an_install_copied_from_the_checkout_is_named_by_the_commit_its_files_are(tmp_path: Path) -> None:
    """``pip install .`` of teparity's tree (RECORD and direct_url.json as pip writes them): HEAD's files name HEAD; a
    changed file makes it a working tree with changes on top of HEAD, not the clean commit."""
    head = _git(REPO, "rev-parse", "HEAD")
    site = tmp_path / "site"
    site.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD", "src/teparity"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "--strip-components=1", "-C", str(site)], input=archive, check=True)
    info = site / "teparity-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: teparity\nVersion: 0.1.0\n")
    files = sorted(path.relative_to(site).as_posix() for path in (site / "teparity").rglob("*.py"))
    (info / "RECORD").write_text("".join(f"{name},,\n" for name in files))
    (info / "direct_url.json").write_text('{"url": "file://%s", "dir_info": {}}' % REPO)
    assert _commit_named(site) == f"teparity 0.1.0, installed from a source tree at {head[:12]} ({REPO})"
    with (site / "teparity" / "records.py").open("a") as changed:
        changed.write("\n# a change nothing committed\n")
    assert _commit_named(site).startswith(f"teparity 0.1.0, installed from a working tree with changes on top of {head[:12]}")
