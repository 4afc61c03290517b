"""Fixtures every harness test gets."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from teparity.launch.fork_client import FORK_SERVER_VARIABLE
from harness import REPO


@pytest.fixture(autouse=True)
def environment_restored() -> Iterator[None]:
    """Each test starts in the environment the last one started in: torch writes its defaults into ``os.environ`` as
    it runs (a checkpointed backward sets ``TORCHINDUCTOR_CACHE_DIR``), and a fork server this process started fits
    only ranks of its own environment (``teparity.launch.fork_choice.unfit``), so one test's writes would turn the
    next one's forked pool into a spawned one. The fork server's own address stays: the server outlives the test."""
    saved = dict(os.environ)
    yield
    server = os.environ.get(FORK_SERVER_VARIABLE)
    os.environ.clear()
    os.environ.update(saved)
    if server is not None:
        os.environ[FORK_SERVER_VARIABLE] = server


@pytest.fixture
def venv_without(tmp_path: Path) -> Callable[..., Path]:
    """A venv of this Python holding what this one holds but the given distributions and teparity's own install
    (run it with the checkout's ``src`` on ``PYTHONPATH``): a real Python where they are not installed, whose every
    process (xdist workers, the environment probe, ranks) sees the same absence. Its site-packages links to this
    one's entries, so it takes a second; what is installed into it stays there."""

    def make(*distributions: str) -> Path:
        root = tmp_path / f"venv-without-{'-'.join(distributions) or 'teparity'}"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
        left_out = {part for name in (*distributions, "teparity") for part in _entries(name)}
        here = Path(sysconfig.get_path("purelib"))
        there = Path(sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)}))
        for entry in here.iterdir():
            if entry.name not in left_out:
                (there / entry.name).symlink_to(entry)
        return root / "bin" / "python"

    return make


def _entries(distribution: str) -> set[str]:
    """The entries of site-packages that a distribution installed: its packages, modules, ``.pth`` and dist-info."""
    try:
        files = importlib.metadata.distribution(distribution).files or ()
    except importlib.metadata.PackageNotFoundError:
        return set()
    return {Path(str(file)).parts[0] for file in files if not str(file).startswith("..")}


class PackageCopy:
    """A copy of the package, its gate tiers, the registrations' harness test, conftest.py and pyproject.toml: where a
    recipe of docs/conventions.md is followed as written (``harness/test_recipe.py``, ``test_strategy.py``)."""

    def __init__(self, tmp_path: Path) -> None:
        import shutil

        self.root, self.repo = tmp_path / "repo", REPO
        shutil.copytree(self.repo / "src", self.root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        shutil.copytree(self.repo / "tests", self.root / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        (self.root / "harness").mkdir()
        for name in ("__init__.py", "test_registrations.py"):
            shutil.copy(self.repo / "harness" / name, self.root / "harness")
        for name in ("conftest.py", "pyproject.toml"):
            shutil.copy(self.repo / name, self.root)
        self.package = self.root / "src" / "teparity"
        self.env = {"PYTHONPATH": str(self.root / "src"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        self.report = tmp_path / "report.json"

    def insert(self, relative: str, before: str, text: str) -> None:
        """Put ``text`` before the one ``before`` of the package's file (the recipe's anchor)."""
        path = self.package / relative
        source = path.read_text()
        assert source.count(before) == 1, f"the recipe's anchor {before!r} is not once in {relative}: update the recipe and its test"
        path.write_text(source.replace(before, text + before, 1))

    def changed(self) -> list[str]:
        """The package's source files that differ from the checkout's, or that it lacks."""
        import filecmp

        original = self.repo / "src" / "teparity"
        return [path.relative_to(self.package).as_posix() for path in sorted(self.package.rglob("*.py"))
                if not (original / path.relative_to(self.package)).exists()
                or not filecmp.cmp(path, original / path.relative_to(self.package), shallow=False)]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` in the copy, with the copy's package on the path."""
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=self.root, env=self.env)

    def gate_rows(self, test: str) -> tuple[dict[tuple[str, str], list[str]], subprocess.CompletedProcess[str]]:
        """The copy's registrations must pass; then the gate on ``test``: its report's rows (check, executor) -> the
        outcomes, and the run."""
        import json

        registrations = self.run("-m", "pytest", "-q", "-p", "no:cacheprovider", "harness/test_registrations.py")
        assert registrations.returncode == 0, registrations.stdout[-3000:]
        gate = self.run("-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", test, f"--teparity-report={self.report}")
        assert gate.returncode == 0, gate.stdout[-3000:]
        results = json.loads(self.report.read_text())["results"]
        return {(row["check"], row["executor"]): [t["outcome"] for t in row["tests"]] for row in results}, gate


@pytest.fixture
def package_copy(tmp_path: Path) -> PackageCopy:
    return PackageCopy(tmp_path)
