"""A PR's thunder is a source tree: installed from a checkout it reports ``0.2.7.dev0``, which PEP 440 orders below every
nightly. Made here from the installed thunder wheel (its files, version ``0.2.7.dev0``, a git commit dated like a
nightly) and installed as a PR's CI installs it (``pip install -e``), it is read as that date's nightly and the CPU gate
judges it verdict for verdict as it judges the wheel (``teparity.stack.placement``)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from teparity.report.relative import diff
from teparity.report.parity import read_report
from harness import REPO

#: The tree's commit date: it reads as this date's nightly.
DATE = "2025-11-23"
PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "lightning-thunder"
version = "0.2.7.dev0"

[tool.setuptools.packages.find]
include = ["thunder*"]
"""


def source_tree(where: Path) -> Path:
    """A checkout-like tree of the installed thunder: its package, a pyproject at version 0.2.7.dev0 (thunder's
    ``__about__.py`` on its main branch), one commit dated ``DATE``."""
    spec = importlib.util.find_spec("thunder")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("lightning-thunder is not installed: no wheel to make a source tree of")
    tree = where / "lightning-thunder"
    shutil.copytree(spec.submodule_search_locations[0], tree / "thunder", ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "pyproject.toml").write_text(PYPROJECT)
    stamp = f"{DATE}T12:00:00+00:00"
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_NAME": "teparity",
           "GIT_AUTHOR_EMAIL": "teparity@localhost", "GIT_COMMITTER_NAME": "teparity", "GIT_COMMITTER_EMAIL": "teparity@localhost"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "a thunder source tree"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, env=env, timeout=120)
    return tree


def _gate(python: str, report: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([python, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", f"--teparity-report={report}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.timeout(1200)
def test_a_source_tree_of_thunder_reads_as_its_dates_nightly_and_the_gate_judges_it_as_the_wheel(
        tmp_path: Path, venv_without: Callable[..., Path]) -> None:
    tree = source_tree(tmp_path)
    python = venv_without("lightning-thunder")
    # pip builds it as a PR's CI does, in an isolated environment of setuptools from the package index.
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                                "-e", str(tree)],
                               capture_output=True, text=True, timeout=600, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    wheel, as_tree = _gate(sys.executable, tmp_path / "wheel.json"), _gate(str(python), tmp_path / "tree.json")
    assert wheel.returncode == 0 and as_tree.returncode == 0, (wheel.stdout[-2000:], as_tree.stdout[-3000:])
    read_as = f"0.2.7.dev{DATE.replace('-', '')}"
    environment = json.loads((tmp_path / "tree.json").read_text())["environment"]
    assert environment["versions"]["thunder"] == read_as
    [source] = environment["versions"]["sources"]
    assert source["installed"] == "0.2.7.dev0" and source["source"].startswith("an editable source tree at "), source
    header = re.sub(r"\nteparity: {4,}", " ", as_tree.stdout)  # a long header line continues on the next, indented
    assert "placed by its source: lightning-thunder 0.2.7.dev0: an editable source tree at" in header
    assert f"of {DATE}, read as {read_as}" in header
    found = diff(read_report(tmp_path / "wheel.json"), read_report(tmp_path / "tree.json"))
    assert not (found.regressed or found.fixed or found.changed or found.new or found.removed), found.lines()
