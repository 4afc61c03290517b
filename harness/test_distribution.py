"""Under ``-n`` the gate schedules its tests longest first unless the user picked a ``--dist``: the long
tests start together, each with a short one queued behind it, and a worker that frees up takes the
longest one left; tests that share a rank run (``shares_runs``) go to one worker together, so it runs once."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
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


def _scheduler(durations: dict[str, float], nodes: int, collection: list[str] | None = None,
               units: Path | None = None) -> tuple[Any, list[_Node]]:
    config = SimpleNamespace(getvalue=lambda name: [f"{nodes}*popen"], getoption=lambda name: None, cache=None)
    scheduler = schedule.make_scheduler(config, None, units)
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


def test_tests_that_share_a_run_go_to_one_worker_as_one_unit(tmp_path: Path) -> None:
    """A unit's expected duration is its tests' sum: the two 6 s tests that share a run (12 s) go before the
    10 s test, together, to the first worker; the third test sharing nothing keeps its own place."""
    (tmp_path / "gw1.json").write_text(json.dumps({"shared-a": "run-x", "shared-b": "run-x"}))
    durations = {"alone": 10.0, "shared-a": 6.0, "other": 8.0, "shared-b": 6.0}
    scheduler, (gw0, gw1) = _scheduler(durations, 2, units=tmp_path)
    names = scheduler.collection
    assert [names[i] for i in gw0.sent] == ["shared-a", "shared-b"]
    assert [names[i] for i in gw1.sent] == ["alone", "other"]


def test_without_the_workers_keys_every_test_is_a_unit_of_its_own(tmp_path: Path) -> None:
    scheduler, (gw0, gw1) = _scheduler({"shared-a": 6.0, "shared-b": 6.0, "other": 1.0}, 2, units=tmp_path)
    assert [scheduler.collection[i] for i in gw0.sent] == ["shared-a", "other"]


def test_a_worker_writes_the_keys_of_its_tests_from_their_parameters(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Format strings and callables over the parameters; an xdist run writes them for the scheduler, and every
    test of a key runs on one worker (a module-scoped fixture that counts its runs runs once per key)."""
    pytester.makepyfile(test_shared=textwrap.dedent("""
        import os
        import pytest

        @pytest.fixture(scope="module", params=["a", "b"])
        def scenario(request):
            with open(os.environ["TEPARITY_TEST_RUNS"], "a") as runs:
                runs.write(f"{request.param} {os.environ['PYTEST_XDIST_WORKER']}\\n")
            return request.param

        @pytest.mark.shares_runs("scenario-{scenario}")
        @pytest.mark.parametrize("check", range(4))
        def test_check(scenario, check):
            pass

        @pytest.mark.shares_runs(lambda params: f"half-{params['n'] // 2}")
        @pytest.mark.parametrize("n", range(4))
        def test_called(n):
            pass
    """))
    runs = pytester.path / "runs.txt"
    monkeypatch.setenv("TEPARITY_TEST_RUNS", str(runs))
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-ranks=warm", "-n", "3")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    assert sorted(line.split()[0] for line in runs.read_text().splitlines()) == ["a", "b"], runs.read_text()


def test_shared_run_keys_from_a_format_string_or_a_callable(pytester: pytest.Pytester) -> None:
    items = pytester.getitems(textwrap.dedent("""
        import pytest

        @pytest.mark.shares_runs("ddp-{executor}-{recipe}")
        @pytest.mark.parametrize("recipe", ["delayed"])
        @pytest.mark.parametrize("executor", ["legacy"])
        def test_formatted(executor, recipe):
            pass

        @pytest.mark.shares_runs(lambda params: f"sharding-{params['variant'].split('-')[0]}")
        @pytest.mark.parametrize("variant", ["zero2-layer"])
        def test_called(variant):
            pass

        def test_alone():
            pass
    """))
    assert [schedule.shared_run_key(item) for item in items] == ["ddp-legacy-delayed", "sharding-zero2", None]
