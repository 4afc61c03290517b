"""The parity report's timeline says where a run's time went, not only its tests': when the process started,
when the xdist workers were up and had collected, when the first test started and the last one ended, when
the workers went down and when the session ended, after every plugin's session finish."""

from __future__ import annotations

import json
import textwrap

import pytest

from teparity.report.table import CONTINUED_INDENT, unwrapped
from teparity.gate.timeline import PHASES, Timeline

_TESTS = """import time

import pytest


@pytest.mark.check("phases")
def test_one():
    time.sleep(0.3)


@pytest.mark.check("phases")
def test_two():
    pass
"""
#: A plugin whose session finish takes a second in the controller (or a lone process): a run's wall time
#: must hold it, as pytest's own does.
_SLOW_FINISH = """import time


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        time.sleep(1.0)
"""


def _run(pytester: pytest.Pytester, *args: str) -> dict:
    pytester.makepyfile(test_phases=_TESTS)
    pytester.makeconftest(_SLOW_FINISH)
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-ranks=warm",
                                           "--teparity-report", "report.json", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    said = pytest.LineMatcher(unwrapped(result.stdout.str(), CONTINUED_INDENT).splitlines())
    said.fnmatch_lines(["teparity time: *seconds from configure: process started -*, session started *"])
    return json.loads((pytester.path / "report.json").read_text())["timeline"]


def _in_order(phases: dict[str, float]) -> None:
    assert list(phases) == [p for p in PHASES if p in phases]
    assert list(phases.values()) == sorted(phases.values()), phases
    assert phases["process_started"] < 0 <= phases["session_started"]


def test_an_xdist_run_marks_its_workers_and_every_plugins_session_finish(pytester: pytest.Pytester) -> None:
    timeline = _run(pytester, "-n", "2")
    phases = timeline["phases"]
    assert {"workers_ready", "workers_collected", "workers_down"} <= set(phases), phases
    assert "collected" not in phases  # the controller collects nothing
    _in_order(phases)
    first = min(test["start_s"] for test in timeline["tests"])
    assert phases["first_test_started"] == pytest.approx(first, abs=0.002)
    assert phases["session_finished"] - phases["last_test_finished"] >= 1.0  # the conftest's slow finish
    assert timeline["wall_s"] == phases["session_finished"]


def test_a_lone_run_marks_its_collection(pytester: pytest.Pytester) -> None:
    phases = _run(pytester, "-p", "no:xdist")["phases"]
    assert "collected" in phases and not {"workers_ready", "workers_collected", "workers_down"} & set(phases)
    _in_order(phases)
    assert phases["session_finished"] - phases["last_test_finished"] >= 1.0


def test_a_phase_keeps_its_latest_mark_and_unknown_phases_are_refused() -> None:
    timeline = Timeline(started=100.0)
    timeline.mark("workers_ready", 102.0)
    timeline.mark("workers_ready", 101.0)  # an earlier worker's report, arriving late
    assert timeline.phases() == {"workers_ready": 2.0}
    with pytest.raises(ValueError, match="unknown phase 'workers_up'"):
        timeline.mark("workers_up", 103.0)


def test_every_process_of_a_run_leaves_its_objects_out_of_the_last_garbage_collection(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter's last collection took about a second once torch and thunder were imported, and an xdist
    run ends only once its workers exited: the plugin freezes what exists at exit (``gc.freeze``), in the
    controller and in every worker, and every exit handler still runs."""
    pytester.makeconftest(textwrap.dedent("""
        import atexit, gc, os

        def pytest_configure(config):  # registered first, so this handler runs last
            def said():
                with open(os.path.join(os.environ["TEPARITY_TEST_OUT"], f"{os.getpid()}.txt"), "w") as out:
                    out.write(str(gc.get_freeze_count()))
            atexit.register(said)
    """))
    pytester.makepyfile(test_one="def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    out = pytester.mkdir("out")
    monkeypatch.setenv("TEPARITY_TEST_OUT", str(out))
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-ranks=warm", "-n", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    counts = [int(path.read_text()) for path in out.iterdir()]
    assert len(counts) == 3 and all(count > 0 for count in counts), f"objects frozen at exit per process (controller, 2 workers): {counts}"
