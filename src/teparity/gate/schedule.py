"""Longest first: the xdist scheduler of a gate run under ``-n`` when no ``--dist`` is given.

A gate run's wall time is its busiest worker's. Its tests take from 0.01 s (a skip) to about 30 s (a DDP
llama block), so the order they start in decides it: xdist's ``load`` hands out consecutive pairs in
collection order and ``worksteal`` consecutive chunks, and either can leave two long tests queued on one
worker while others idle. This scheduler keeps the pending tests sorted by expected duration, longest
first, and gives a worker that asks the longest one left; the test a worker holds behind the one it runs
(an xdist worker needs its next test to start the current one) is the shortest left while that is short, so
that no long test waits behind another on one worker.

Expected durations: the ``duration_s`` of each test in the last run on this checkout (pytest's cache,
``teparity/durations``, written by the parity reporter), over ``durations.json`` beside this module
(generated from a committed GPU run's parity report by ``python -m teparity durations``). A test in neither
is expected to take as long as the longest known one, so new tests start early.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

#: pytest's cache key of the last run's durations (nodeid -> seconds).
CACHE_KEY = "teparity/durations"
#: The committed expected durations, used where this checkout's cache has none.
COMMITTED = Path(__file__).with_name("durations.json")
#: A test expected to take less than this is held behind a running one.
SHORT_S = 1.0


def expected_durations(config: pytest.Config) -> dict[str, float]:
    """The committed durations, overlaid with this checkout's last run's (pytest's cache, when enabled)."""
    durations: dict[str, float] = json.loads(COMMITTED.read_text()) if COMMITTED.exists() else {}
    cache = getattr(config, "cache", None)
    if cache is not None:
        durations.update(cache.get(CACHE_KEY, {}))
    return durations


def remember_durations(config: pytest.Config, durations: Mapping[str, float]) -> None:
    """Keep this run's test durations for the next run's order (tests not run now keep their old ones)."""
    cache = getattr(config, "cache", None)
    if cache is not None and durations:
        cache.set(CACHE_KEY, {**cache.get(CACHE_KEY, {}), **{k: round(v, 2) for k, v in durations.items()}})


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler, built on xdist's ``LoadScheduling`` (imported here: xdist is only there under ``-n``)."""
    from xdist.scheduler import LoadScheduling

    class LongestFirstScheduling(LoadScheduling):
        """xdist's load scheduling with the pending tests in expected-duration order (module docstring)."""

        def __init__(self, config: pytest.Config, log: Any, durations: Mapping[str, float]) -> None:
            super().__init__(config, log)
            self.durations = durations
            self.unknown = max(durations.values(), default=0.0)

        def expected(self, index: int) -> float:
            assert self.collection is not None
            return self.durations.get(self.collection[index], self.unknown)

        def schedule(self) -> None:
            assert self.collection_is_completed
            if self.collection is None:
                if not self._check_nodes_have_same_collection():
                    self.log("**Different tests collected, aborting run**")
                    return
                self.collection = next(iter(self.node2collection.values()))
                self.pending[:] = sorted(range(len(self.collection)), key=self.expected, reverse=True)
                for node in self.nodes:  # one each first, so that the longest tests start together
                    self._send(node, longest=True)
            for node in self.nodes:
                self.check_schedule(node)

        def check_schedule(self, node: Any, duration: float = 0) -> None:
            if node.shutting_down:
                return
            held = self.node2pending[node]
            while self.pending and len(held) < 2:
                # Behind a long test goes the shortest one left, if it is short; else the longest one left.
                behind_long = bool(held) and self.expected(held[-1]) >= SHORT_S
                self._send(node, longest=not (behind_long and self.expected(self.pending[-1]) < SHORT_S))
            if not self.pending:
                node.shutdown()

        def _send(self, node: Any, longest: bool) -> None:
            if self.pending:
                index = self.pending.pop(0 if longest else -1)
                self.node2pending[node].append(index)
                node.send_runtest_some([index])

    return LongestFirstScheduling(config, log, expected_durations(config))
