"""run_ranks: results in rank order, and every way a rank can fail becomes a prompt failure with evidence."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from teparity.inrank import faults
from teparity.launch.fresh import run_ranks
from teparity.launch.outcome import STACK_DUMP_WAIT_S, RanksFailed

pytestmark = pytest.mark.multirank
SPAWN_ALLOWANCE_S = 30.0  # starting and importing torch in every rank on a loaded 2-core runner


def _assert_gone(pids: list[int]) -> None:
    alive = faults.still_running(pids)
    assert not alive, f"rank processes outlived run_ranks: {alive}"


@pytest.mark.parametrize("world_size", [1, 3])
def test_results_come_back_in_rank_order(world_size: int, tmp_path: Path) -> None:
    results = run_ranks(faults.sum_of_ranks, world_size=world_size, backend="gloo", workdir=tmp_path)
    total = sum(range(world_size))
    assert results == [(rank, world_size, total) for rank in range(world_size)]


def test_a_raising_rank_is_named_with_its_traceback(tmp_path: Path) -> None:
    with pytest.raises(RanksFailed) as failed:
        run_ranks(faults.raise_on_last_rank, "boom from the last rank", world_size=2, backend="gloo", workdir=tmp_path)
    by_rank = {f.rank: f for f in failed.value.failures}
    assert by_rank[1].kind == "raised"
    assert "ValueError: boom from the last rank" in by_rank[1].detail
    assert "raise_on_last_rank" in by_rank[1].detail
    assert "--- rank 1: raised ---" in str(failed.value)
    assert "re-run: python -m pytest" in str(failed.value)
    _assert_gone(failed.value.pids)


def test_a_rank_that_exits_reports_its_exit_code(tmp_path: Path) -> None:
    with pytest.raises(RanksFailed) as failed:
        run_ranks(faults.exit_on_last_rank, 7, world_size=2, backend="gloo", workdir=tmp_path)
    by_rank = {f.rank: f for f in failed.value.failures}
    assert by_rank[1].kind == "exited"
    assert "exited with code 7" in by_rank[1].summary
    _assert_gone(failed.value.pids)


def test_a_killed_rank_reports_its_signal(tmp_path: Path) -> None:
    with pytest.raises(RanksFailed) as failed:
        run_ranks(faults.kill_last_rank, world_size=2, backend="gloo", workdir=tmp_path)
    by_rank = {f.rank: f for f in failed.value.failures}
    assert by_rank[1].kind == "signaled"
    assert "SIGKILL" in by_rank[1].summary
    _assert_gone(failed.value.pids)


def _slow_start(folder: Path, seconds: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank spawned from now on sleeps ``seconds`` before it runs anything, as a rank importing torch on a
    loaded runner does (a ``sitecustomize`` on the ranks' path: spawn starts a fresh interpreter)."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(f"import time\ntime.sleep({seconds})\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))


@pytest.mark.parametrize(("world_size", "start_up_s"), [(2, 0.0), (3, 0.0), (2, 15.0)])
def test_a_hang_fails_within_the_deadline_with_every_stack_and_no_orphans(
    world_size: int, start_up_s: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline counts from when every rank has joined the group: a start-up longer than the deadline (15 s
    against 8 s here; a loaded runner's torch import) still ends with every rank's stack in the hung collective."""
    deadline = 8.0
    if start_up_s:
        _slow_start(tmp_path / "slow", start_up_s, monkeypatch)
    with pytest.raises(RanksFailed) as failed:
        # A process-group timeout far beyond the deadline: the harness, not gloo, must end this.
        run_ranks(
            faults.skip_collective_on_last_rank, world_size=world_size, backend="gloo",
            timeout=deadline, pg_timeout=600, workdir=tmp_path / "runs",
        )
    ended = time.time()
    joined = [path.stat().st_mtime for path in (tmp_path / "runs").glob("ranks-*/rank*.joined")]
    assert len(joined) == world_size, str(failed.value)
    since_joined = ended - max(joined)
    assert deadline <= since_joined < deadline + STACK_DUMP_WAIT_S + 5, f"failed {since_joined:.1f} s after every rank joined"
    failures = {f.rank: f for f in failed.value.failures}
    assert sorted(failures) == list(range(world_size)), str(failed.value)
    assert all(f.kind == "hung" for f in failures.values())
    assert all("after every rank joined the process group" in f.summary for f in failures.values()), str(failed.value)
    for rank in range(world_size - 1):
        assert "in all_reduce" in failures[rank].detail, failures[rank].detail
    assert "in waiting_for_a_collective_that_others_skipped" in failures[world_size - 1].detail
    _assert_gone(failed.value.pids)


def test_ranks_die_with_their_parent(tmp_path: Path) -> None:
    """If the parent is SIGKILLed (no finally runs), PR_SET_PDEATHSIG still ends every rank."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        from teparity.inrank import faults
        from teparity.launch.fresh import run_ranks
        if __name__ == "__main__":
            run_ranks(faults.skip_collective_on_last_rank, world_size=2, backend="gloo",
                      timeout=600, pg_timeout=600, workdir={str(tmp_path)!r})
    """))
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        ranks = _wait_for_children(parent.pid, count=2, within=SPAWN_ALLOWANCE_S)
        _wait_for(lambda: len(list(tmp_path.glob("ranks-*/rank*.log"))) == 2, within=SPAWN_ALLOWANCE_S)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    alive = faults.still_running_after(ranks, 10)
    assert not alive, f"ranks outlived their SIGKILLed parent: {alive}"


def test_leaving_a_group_joined_before_thunder_was_imported_ends_its_threads(tmp_path: Path) -> None:
    """A rank imports thunder after joining (its preload); the group must still go with destroy_process_group,
    or its gloo threads outlive it and can abort the interpreter's shutdown."""
    script = tmp_path / "leave.py"
    script.write_text(textwrap.dedent(f"""
        import os
        from pathlib import Path
        import torch.distributed as dist
        from teparity.launch.rank import join_group
        join_group(0, 1, "gloo", Path({str(tmp_path)!r}) / "rendezvous", 30.0)
        import thunder  # noqa: F401  (it imports torch.distributed.nn)
        dist.destroy_process_group()
        print([Path(f"/proc/self/task/{{t}}/comm").read_text().strip() for t in os.listdir("/proc/self/task")])
    """))
    completed = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "pt_gloo_runloop" not in completed.stdout, completed.stdout


def _wait_for(condition: Callable[[], bool], *, within: float) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"not within {within} s"
        time.sleep(0.2)


def _wait_for_children(parent: int, *, count: int, within: float) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        ranks = [pid for pid in _children(parent) if b"spawn_main" in _cmdline(pid)]
        if len(ranks) >= count:
            return ranks
        time.sleep(0.2)
    raise AssertionError(f"{count} ranks of {parent} did not start within {within} s")


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_two_xdist_workers_run_ranks_at_once(pytester: pytest.Pytester) -> None:
    """Rendezvous files live in each run's own directory: concurrent workers never meet."""
    pytester.makepyfile(
        test_concurrent="""
        import pytest
        from teparity.inrank import faults
        from teparity.launch.fresh import run_ranks

        @pytest.mark.parametrize("n", range(4))
        def test_ranks(n, tmp_path):
            assert run_ranks(faults.sum_of_ranks, world_size=2, backend="gloo", workdir=tmp_path) == [(0, 2, 1), (1, 2, 1)]
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "teparity.plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*2 workers*"])


@pytest.mark.parametrize(("sides", "batches"), [("serial", [1, 1]), ("side-by-side", [2])])
def test_the_sides_option_decides_whether_a_tests_sides_share_a_launch(
    sides: str, batches: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--teparity-sides``: serial hands the pools one side at a time, side-by-side both at once; the
    results come back in call order either way."""
    from teparity.gate.ranks import rank_runner
    from teparity.launch import pool

    seen: list[int] = []

    def launch(calls, **settings):
        seen.append(len(calls))
        return [[args[1:]] for _in_rank, args, _label in calls]

    monkeypatch.setattr(pool, "warm_ranks_side_by_side", launch)
    runner = rank_runner("forked", "gloo", 60.0, lambda: tmp_path, concurrent=sides == "side-by-side")
    assert runner.side_by_side([(faults.pid_of_rank, ("a",)), (faults.pid_of_rank, ("b",))], world_size=1) == [[("a",)], [("b",)]]
    assert seen == batches
