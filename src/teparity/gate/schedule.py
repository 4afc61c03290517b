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
(each test's longest over committed GPU runs' parity reports, by ``python -m teparity durations``). A test in neither
is expected to take as long as the longest known one, so new tests start early.

Shared runs: tests marked ``shares_runs(key)`` with one key (a module-scoped fixture's rank run that several
checks judge, a side run that another test reuses) go to one worker together, as one unit whose expected
duration is their sum, so that the run happens once instead of once per worker that gets one of them. Only
the workers see markers: each writes its tests' keys to a file in a folder that the controller names
(``UNITS_INPUT``), before it reports its collection; the scheduler reads it when it orders the tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

#: pytest's cache key of the last run's durations (nodeid -> seconds).
CACHE_KEY = "teparity/durations"
#: The committed expected durations, used where this checkout's cache has none.
COMMITTED = Path(__file__).with_name("durations.json")
#: A test expected to take less than this is held behind a running one.
SHORT_S = 1.0
#: The marker of tests that share a rank run: ``shares_runs(key)``, ``key`` a format string over the test's
#: parameters or a callable of them.
MARKER = "shares_runs"
#: The xdist ``workerinput`` key that names the folder where workers write their tests' shared-run keys.
UNITS_INPUT = "teparity_units"


def shared_run_key(item: pytest.Item) -> str | None:
    """The key of the rank runs ``item`` shares with other tests (its ``shares_runs`` marker), or None."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    params = item.callspec.params if hasattr(item, "callspec") else {}
    key: str | Callable[[dict[str, Any]], str] = marker.args[0]
    return key(params) if callable(key) else key.format(**params)


def write_units(folder: str, worker: str, items: Iterable[pytest.Item]) -> None:
    """A worker's tests' shared-run keys (nodeid -> key, tests without one left out) in ``folder``, for the
    scheduler; written whole, then renamed, so the scheduler never reads half of it."""
    keys = {item.nodeid: key for item in items if (key := shared_run_key(item)) is not None}
    path = Path(folder) / f"{worker}.json"
    path.with_suffix(".part").write_text(json.dumps(keys))
    os.replace(path.with_suffix(".part"), path)


def read_units(folder: Path | None, collection: list[str]) -> list[list[int]]:
    """The collection's indices in units: those whose tests share a key together (in collection order), every
    other test alone. The keys of any one worker serve (all collect the same tests); none where no worker
    wrote them (every test alone)."""
    written = sorted(folder.glob("*.json")) if folder is not None else []
    keys: dict[str, str] = json.loads(written[0].read_text()) if written else {}
    units: dict[str, list[int]] = {}
    for index, nodeid in enumerate(collection):
        units.setdefault(keys.get(nodeid, f"\0{nodeid}"), []).append(index)
    return list(units.values())


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


def make_scheduler(config: pytest.Config, log: Any, units_folder: Path | None = None) -> Any:
    """The scheduler, built on xdist's ``LoadScheduling`` (imported here: xdist is only there under ``-n``);
    ``units_folder``: where the workers write their tests' shared-run keys (``write_units``)."""
    from xdist.scheduler import LoadScheduling

    class LongestFirstScheduling(LoadScheduling):
        """xdist's load scheduling with the pending tests in expected-duration order, tests that share a run
        sent together (module docstring)."""

        def __init__(self, config: pytest.Config, log: Any, durations: Mapping[str, float]) -> None:
            super().__init__(config, log)
            self.durations = durations
            self.unknown = max(durations.values(), default=0.0)
            #: A test's index -> the indices of its unit (itself alone, or the tests it shares a run with).
            self.unit_of: dict[int, list[int]] = {}

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
                units = sorted(read_units(units_folder, self.collection), key=lambda unit: sum(map(self.expected, unit)),
                               reverse=True)
                self.unit_of = {index: unit for unit in units for index in unit}
                self.pending[:] = [index for unit in units for index in unit]
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
            """The longest (or the shortest) test left, with the rest of its unit."""
            if self.pending:
                picked = self.pending[0 if longest else -1]
                unit = [index for index in self.unit_of.get(picked, [picked]) if index in self.pending]
                for index in unit:
                    self.pending.remove(index)
                self.node2pending[node].extend(unit)
                node.send_runtest_some(unit)

    return LongestFirstScheduling(config, log, expected_durations(config))
