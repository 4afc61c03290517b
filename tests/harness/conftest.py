"""Fixtures every harness test gets."""

from __future__ import annotations

import os
from collections.abc import Iterator

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
