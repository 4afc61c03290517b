"""Under ``-n`` the gate schedules its tests longest first unless the user picked a ``--dist``: the long
tests start together, each with a short one queued behind it, and a worker that frees up takes the
longest one left."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from teparity.gate import schedule

_SAY_DIST = "def pytest_report_header(config):\n    return f'dist mode: {config.option.dist}'\n"


@pytest.mark.parametrize(
    ("args", "header"),
    [
        (("-n", "2"), "teparity: distribution: longest first *"),
        (("-n", "2", "--dist", "worksteal"), "teparity: distribution: --dist worksteal"),
        ((), "teparity: distribution: one process"),
    ],
)
def test_longest_first_is_the_default_under_n(pytester: pytest.Pytester, args: tuple[str, ...], header: str) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-ranks=warm", *args)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([header])


class _Node:
    """An xdist worker as the scheduler sees it: what it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduler(durations: dict[str, float], nodes: int, collection: list[str] | None = None) -> tuple[Any, list[_Node]]:
    config = SimpleNamespace(getvalue=lambda name: [f"{nodes}*popen"], getoption=lambda name: None, cache=None)
    scheduler = schedule.make_scheduler(config, None)
    scheduler.durations, scheduler.unknown = durations, max(durations.values())
    workers = [_Node(f"gw{n}") for n in range(nodes)]
    collection = collection or list(durations)
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    return scheduler, workers


def test_the_longest_tests_start_together_each_with_a_short_one_behind_it() -> None:
    durations = {"long-a": 30.0, "skip-1": 0.0, "mid": 9.0, "long-b": 25.0, "skip-2": 0.01, "short": 3.0}
    scheduler, (gw0, gw1) = _scheduler(durations, 2)
    names = scheduler.collection
    assert [names[i] for i in gw0.sent] == ["long-a", "skip-1"]
    assert [names[i] for i in gw1.sent] == ["long-b", "skip-2"]
    # gw1 ends long-b first: it takes the longest test left, then a short one goes behind that.
    scheduler.mark_test_complete(gw1, gw1.sent[0], 25.0)
    assert names[gw1.sent[-1]] == "mid"
    scheduler.mark_test_complete(gw1, gw1.sent[1], 0.0)
    assert names[gw1.sent[-1]] == "short"
    assert gw1.shutting_down, "nothing is left to send"
    scheduler.mark_test_complete(gw0, gw0.sent[0], 30.0)
    assert gw0.shutting_down and [names[i] for i in gw0.sent] == ["long-a", "skip-1"]


def test_an_unknown_test_is_expected_to_take_as_long_as_the_longest_known() -> None:
    """A new test starts among the longest: it is sent first, before a known 1.5 s test."""
    scheduler, (gw0,) = _scheduler({"short": 1.5, "long": 20.0}, 1, collection=["short", "new"])
    assert scheduler.expected(scheduler.collection.index("new")) == 20.0
    assert scheduler.collection[gw0.sent[0]] == "new"
