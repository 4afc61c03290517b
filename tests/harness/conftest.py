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
