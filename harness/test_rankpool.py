"""Warm ranks, spawned or forked from the fork server: a run in a warm pool gives what fresh ranks give,
starts in well under a second, and keeps every guarantee of fresh ranks (failures with evidence,
deadlines, stacks, no orphans)."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from teparity.inrank import faults, forkable
from teparity.inrank.scenarios import LegacySyncSpec, legacy_sync_run
from teparity.launch import fork_choice, rank_pool
from teparity.launch import pool as rankpool
from teparity.launch.fork_client import FORK_SERVER_VARIABLE
from teparity.launch.fresh import run_ranks
from teparity.launch.outcome import STACK_DUMP_WAIT_S, RanksFailed

pytestmark = pytest.mark.multirank
FORK_PRELOAD = (forkable.__name__,)


@pytest.fixture(params=["spawned", "forked"])
def fork_preload(request: pytest.FixtureRequest) -> rank_pool.ForkPreload:
    """Each pool test runs with spawned ranks and with ranks forked from the preloaded fork server."""
    return FORK_PRELOAD if request.param == "forked" else None


@pytest.fixture
def pool(tmp_path: Path, fork_preload: rank_pool.ForkPreload):
    pool = rank_pool.RankPool(2, "gloo", 30.0, tmp_path, fork_preload=fork_preload)
    yield pool
    pool.close()
    assert not faults.still_running(pool.pids), "warm ranks outlived their pool"


def test_a_warm_side_starts_in_under_a_second_where_fresh_ranks_take_seconds(pool: rank_pool.RankPool, tmp_path: Path) -> None:
    assert pool.run(faults.sum_of_ranks, (), timeout=120) == [(0, 2, 1), (1, 2, 1)]  # start-up included
    pids = pool.pids
    start = time.monotonic()
    assert pool.run(faults.sum_of_ranks, (), timeout=60) == [(0, 2, 1), (1, 2, 1)]
    warm = time.monotonic() - start
    start = time.monotonic()
    run_ranks(faults.sum_of_ranks, world_size=2, backend="gloo", workdir=tmp_path)
    fresh = time.monotonic() - start
    assert pool.pids == pids, "the pool started new ranks"
    assert warm < 1.0 < fresh, f"warm {warm:.2f} s, fresh {fresh:.2f} s"


def test_a_side_after_other_sides_gives_the_bytes_fresh_ranks_give(pool: rank_pool.RankPool, tmp_path: Path) -> None:
    """What couples two sides in a process is reset between them (the CPU trace tier's side here; on a GPU
    the same holds for TE's global FP8 state, checked by ``python -m teparity bench``)."""
    single, ddp = LegacySyncSpec(steps=2, device="cpu"), LegacySyncSpec(steps=2, device="cpu", strategy="thunder-ddp")
    fresh = run_ranks(legacy_sync_run, ddp, world_size=2, backend="gloo", workdir=tmp_path)
    pool.run(legacy_sync_run, (single,), timeout=120)
    pool.run(legacy_sync_run, (ddp,), timeout=120)
    warm = pool.run(legacy_sync_run, (ddp,), timeout=120)
    assert pickle.dumps(warm) == pickle.dumps(fresh)


def test_a_raising_rank_discards_the_pool_with_its_traceback(tmp_path: Path, fork_preload: rank_pool.ForkPreload) -> None:
    first = rankpool.warm_ranks(faults.sum_of_ranks, world_size=2, backend="gloo", timeout=120, workdir=tmp_path,
                                fork_preload=fork_preload)
    assert first == [(0, 2, 1), (1, 2, 1)]
    (pool,) = rankpool._POOLS.values()
    with pytest.raises(RanksFailed) as failed:
        rankpool.warm_ranks(faults.raise_on_last_rank, "boom", world_size=2, backend="gloo", timeout=120, workdir=tmp_path,
                            fork_preload=fork_preload)
    by_rank = {f.rank: f for f in failed.value.failures}
    assert by_rank[1].kind == "raised" and "ValueError: boom" in by_rank[1].detail
    assert "the pool is discarded" in str(failed.value)
    assert not rankpool._POOLS and not faults.still_running(pool.pids)
    again = rankpool.warm_ranks(faults.sum_of_ranks, world_size=2, backend="gloo", timeout=120, workdir=tmp_path,
                                fork_preload=fork_preload)
    assert again == first and set(rankpool._POOLS[next(iter(rankpool._POOLS))].pids).isdisjoint(pool.pids)
    rankpool.close_pools()


def test_one_pool_serves_every_world_size_and_grows_for_more_ranks(tmp_path: Path, fork_preload: rank_pool.ForkPreload) -> None:
    """One-rank and two-rank runs share ranks: the pool regroups them for each run's world size and starts
    rank 1 when a two-rank run first needs it, so each process pays its first-run costs once."""
    def run(world_size: int) -> list[object]:
        return rankpool.warm_ranks(faults.sum_of_ranks, world_size=world_size, backend="gloo", timeout=120,
                                   workdir=tmp_path, fork_preload=fork_preload)

    try:
        assert run(1) == [(0, 1, 0)]
        (pool,) = rankpool._POOLS.values()
        (first,) = pool.pids
        assert run(2) == [(0, 2, 1), (1, 2, 1)]
        assert run(1) == [(0, 1, 0)]
        assert run(2) == [(0, 2, 1), (1, 2, 1)]
        assert list(rankpool._POOLS.values()) == [pool] and pool.pids[0] == first and len(pool.pids) == 2
        assert pool.groups == 4, "each change of world size forms a new group"
    finally:
        rankpool.close_pools()


def test_runs_side_by_side_overlap_on_pools_of_their_own_and_a_failure_discards_them_all(
    tmp_path: Path, fork_preload: rank_pool.ForkPreload
) -> None:
    """The two sides of a pair run at once (``--teparity-sides side-by-side``): each on its own lane's
    pool, results in call order; when one fails, every pool of the call is killed and discarded."""
    def side_by_side(*calls: tuple[object, tuple[object, ...]]) -> list[list[object]]:
        return rankpool.warm_ranks_side_by_side([(fn, args, None) for fn, args in calls], world_size=2, backend="gloo",
                                                timeout=120, workdir=tmp_path, fork_preload=fork_preload)

    try:
        side_by_side((faults.sum_of_ranks, ()), (faults.sum_of_ranks, ()))  # started: the spans below are the runs'
        first, second = side_by_side((faults.span_of_a_sleep, (2.0,)), (faults.span_of_a_sleep, (0.5,)))
        assert second[0][0] < first[0][1] and first[0][0] < second[0][1], f"one after the other: {first} then {second}"
        assert first[0][1] - first[0][0] >= 2.0 > second[0][1] - second[0][0], "the results came back out of call order"
        pools = list(rankpool._POOLS.values())
        assert len(pools) == 2 and set(pools[0].pids).isdisjoint(pools[1].pids)
        with pytest.raises(RanksFailed, match="ValueError: boom"):
            side_by_side((faults.raise_on_last_rank, ("boom",)), (faults.span_of_a_sleep, (30.0,)))
        assert not rankpool._POOLS and not faults.still_running(pid for pool in pools for pid in pool.pids)
    finally:
        rankpool.close_pools()


def test_a_killed_warm_rank_reports_its_signal(pool: rank_pool.RankPool) -> None:
    with pytest.raises(RanksFailed) as failed:
        pool.run(faults.kill_last_rank, (), timeout=120)
    assert {f.rank: f.summary for f in failed.value.failures}[1] == "killed by signal SIGKILL"


def test_a_warm_hang_fails_within_the_deadline_with_every_stack(pool: rank_pool.RankPool) -> None:
    pool.run(faults.sum_of_ranks, (), timeout=120)  # started: the deadline below is the task's alone
    deadline = 5.0
    start = time.monotonic()
    with pytest.raises(RanksFailed) as failed:
        pool.run(faults.skip_collective_on_last_rank, (), timeout=deadline)
    assert time.monotonic() - start < deadline + STACK_DUMP_WAIT_S + 15
    by_rank = {f.rank: f for f in failed.value.failures}
    assert sorted(by_rank) == [0, 1] and all(f.kind == "hung" for f in by_rank.values()), str(failed.value)
    assert all("skip_collective_on_last_rank" in f.detail for f in by_rank.values()), str(failed.value)


def test_pools_are_kept_per_setting_and_closed_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rankpool.close_pools()  # a pool this process started for gate tests it collected (pytest_itemcollected)
    rankpool.warm_ranks(faults.sum_of_ranks, world_size=1, backend="gloo", timeout=120, workdir=tmp_path)
    rankpool.warm_ranks(faults.sum_of_ranks, world_size=1, backend="gloo", timeout=120, workdir=tmp_path,
                        fork_preload=FORK_PRELOAD)
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "1")  # ranks inherit the environment at their start
    rankpool.warm_ranks(faults.sum_of_ranks, world_size=1, backend="gloo", timeout=120, workdir=tmp_path)
    pools = list(rankpool._POOLS.values())
    assert len(pools) == 3
    rankpool.close_pools()
    assert not rankpool._POOLS and not faults.still_running(pid for p in pools for pid in p.pids)


def test_a_forked_rank_skips_the_preloaded_imports_and_takes_the_environment_of_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fork server imported torch (and thunder or TE) once; a pool started in another environment than
    the fork server's is spawned, so what its ranks imported read the environment they run in."""
    forked = rank_pool.RankPool(1, "gloo", 30.0, tmp_path, fork_preload=FORK_PRELOAD)
    try:
        assert forked.run(faults.sum_of_ranks, (), timeout=120) == [(0, 1, 0)]
        log = (forked.run_dir / "rank0.log").read_text()
        assert "start-up: import torch 0.00 s" in log, log
        parent = int(Path(f"/proc/{forked.pids[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert parent != os.getpid(), "the rank was not forked by the fork server"
    finally:
        forked.close()
    monkeypatch.setenv("TEPARITY_TEST_SETTING", "changed")
    rankpool.warm_ranks(faults.environment_variable, "TEPARITY_TEST_SETTING", world_size=1, backend="gloo",
                        timeout=120, workdir=tmp_path, fork_preload=FORK_PRELOAD)
    (pool,) = rankpool._POOLS.values()
    try:
        assert not pool.forked, "a pool in another environment than the fork server's was forked"
        assert pool.run(faults.environment_variable, ("TEPARITY_TEST_SETTING",), timeout=60) == ["changed"]
    finally:
        rankpool.close_pools()


def _parent_script(tmp_path: Path, pids: Path) -> Path:
    """A process that forks a pool of 2 ranks, writes the fork server's pid and theirs, and hangs in a run."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        from pathlib import Path
        from teparity.inrank import faults, forkable
        from teparity.launch.rank_pool import RankPool
        if __name__ == "__main__":
            pool = RankPool(2, "gloo", 600, Path({str(tmp_path)!r}), fork_preload=(forkable.__name__,))
            ranks = pool.run(faults.pid_of_rank, (), timeout=120)
            Path({str(pids)!r}).write_text(" ".join(map(str, [pool.fork_server_pid, *ranks])))
            pool.run(faults.skip_collective_on_last_rank, (), timeout=600)
    """))
    return script


def _kill_when_written(parent: subprocess.Popen[bytes], pids: Path) -> list[int]:
    """SIGKILL ``parent`` once it wrote ``pids``; the pids it wrote."""
    try:
        deadline = time.monotonic() + 120
        while not pids.exists():
            assert time.monotonic() < deadline and parent.poll() is None, "the forked pool did not start"
            time.sleep(0.2)
        time.sleep(0.2)  # written whole
        return [int(pid) for pid in pids.read_text().split()]
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()


def test_forked_ranks_and_their_fork_server_die_with_their_parent(tmp_path: Path) -> None:
    """A process that finds no fork server named starts its own: if it is SIGKILLed (no finally runs), that
    server and every rank it forked die with it."""
    pids = tmp_path / "pids"
    env = {k: v for k, v in os.environ.items() if k != FORK_SERVER_VARIABLE}
    parent = subprocess.Popen([sys.executable, str(_parent_script(tmp_path, pids))], env=env)
    processes = _kill_when_written(parent, pids)
    assert len(processes) == 3 and not set(processes) & {parent.pid}, processes
    alive = faults.still_running_after(processes, 10)
    assert not alive, f"the fork server or forked ranks outlived their parent: {alive} of {processes}"


def test_a_client_that_dies_takes_its_ranks_and_leaves_the_shared_fork_server_serving(tmp_path: Path) -> None:
    """A process that forks from another's fork server (an xdist worker from the controller's): SIGKILLed,
    its ranks die; the server, which outlives it, killed them and forks for the next client."""
    server = fork_choice.fork_server(FORK_PRELOAD, tmp_path)
    pids = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, str(_parent_script(tmp_path, pids))])  # inherits the server's name
    processes = _kill_when_written(parent, pids)
    assert processes[0] == server.pid, f"the client forked from pid {processes[0]}, not the named server {server.pid}"
    alive = faults.still_running_after(processes[1:], 10)
    assert not alive, f"forked ranks outlived their SIGKILLed client: {alive} of {processes[1:]}"
    assert faults.still_running([server.pid]), "the shared fork server died with a client"
    pool = rank_pool.RankPool(2, "gloo", 30.0, tmp_path, fork_preload=FORK_PRELOAD)
    try:
        assert pool.run(faults.sum_of_ranks, (), timeout=120) == [(0, 2, 1), (1, 2, 1)]
        assert pool.fork_server_pid == server.pid
    finally:
        pool.close()


_XDIST_RUN = """
    import json, os
    from pathlib import Path
    from teparity.inrank import faults, forkable
    from teparity.launch.pool import warm_ranks

    def test_forked_ranks(tmp_path):
        parents = warm_ranks(faults.parent_of_rank, world_size=2, backend="gloo", timeout=120, workdir=tmp_path,
                             fork_preload=(forkable.__name__,))
        ranks = warm_ranks(faults.pid_of_rank, world_size=2, backend="gloo", timeout=120, workdir=tmp_path,
                           fork_preload=(forkable.__name__,))
        out = Path(os.environ["TEPARITY_TEST_OUT"]) / os.environ.get("PYTEST_XDIST_WORKER", "main")
        out.write_text(json.dumps({"worker": os.getpid(), "servers": parents, "ranks": ranks}))
        if os.environ.get("TEPARITY_TEST_HANG"):
            (out.parent / (out.name + ".ready")).write_text("")
            warm_ranks(faults.skip_collective_on_last_rank, world_size=2, backend="gloo", timeout=600,
                       workdir=tmp_path, fork_preload=(forkable.__name__,))
"""


def _xdist_run(pytester: pytest.Pytester, out: Path, *, hang: bool) -> subprocess.Popen[bytes]:
    """``pytest -n 2 --dist each`` over ``_XDIST_RUN``, in the background: each worker forks ranks."""
    pytester.makepyfile(test_forked=textwrap.dedent(_XDIST_RUN))
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k != FORK_SERVER_VARIABLE}
    env.update(TEPARITY_TEST_OUT=str(out), **({"TEPARITY_TEST_HANG": "1"} if hang else {}))
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "each", "-p", "teparity.plugin", "-p", "no:cacheprovider",
         f"--basetemp={pytester.path / 'basetemp'}", "test_forked.py"],
        cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def test_an_xdist_run_forks_every_workers_ranks_from_one_fork_server(pytester: pytest.Pytester) -> None:
    """The controller starts the run's one fork server (its imports paid once); both workers fork from it."""
    out = pytester.path / "out"
    run = _xdist_run(pytester, out, hang=False)
    output = run.communicate(timeout=600)[0].decode(errors="replace")
    assert run.returncode == 0, output
    workers = [json.loads((out / name).read_text()) for name in ("gw0", "gw1")]
    servers = {server for worker in workers for server in worker["servers"]}
    assert len(servers) == 1, f"the workers' ranks came from more than one fork server: {workers}"
    (server,) = servers
    logs = list((pytester.path / "basetemp").rglob("forkserver.log"))
    assert len(logs) == 1, f"{len(logs)} fork servers logged their imports: {logs}"
    log = logs[0].read_text()
    assert f"pid {server} for pid {run.pid}," in log, f"the fork server {server} is not the controller's {run.pid}:\n{log}"
    assert log.count("teparity fork server preload: ") == 1, log
    assert all(f"serving pid {w['worker']}" in log for w in workers), log
    assert "one fork server for the run, pid" in output, output


def test_a_sigkilled_xdist_controller_leaves_no_fork_server_and_no_rank(pytester: pytest.Pytester) -> None:
    """SIGKILL the controller while both workers' forked ranks hang in a run: its fork server dies with it,
    and every rank with the fork server."""
    out = pytester.path / "out"
    run = _xdist_run(pytester, out, hang=True)
    try:
        deadline = time.monotonic() + 300
        while not all((out / f"gw{n}.ready").exists() for n in (0, 1)):
            assert time.monotonic() < deadline and run.poll() is None, run.communicate()[0].decode(errors="replace")
            time.sleep(0.2)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    workers = [json.loads((out / name).read_text()) for name in ("gw0", "gw1")]
    processes = sorted({pid for w in workers for pid in [*w["servers"], *w["ranks"]]})
    assert len(processes) == 5, f"one fork server and 2 ranks per worker expected: {workers}"
    alive = faults.still_running_after(processes, 15)
    assert not alive, f"the fork server or forked ranks outlived the SIGKILLed controller: {alive} of {processes}"


_PRESTART_RUN = """
    import json, os
    from pathlib import Path
    from teparity.inrank import faults
    from teparity.launch import pool

    def test_first_run_finds_its_ranks_started(rank_runner):
        if pool._prestarting is not None:
            pool._prestarting.join(120)
        started = [pid for p in pool._POOLS.values() for pid in p.pids]
        ranks = rank_runner(faults.pid_of_rank, world_size=2)
        Path(os.environ["TEPARITY_TEST_OUT"]).write_text(json.dumps({"started": started, "ranks": ranks}))
"""


@pytest.mark.parametrize("dist", [["-p", "no:xdist"], ["-n", "1"]], ids=["lone", "xdist-worker"])
def test_a_process_that_runs_tests_starts_its_ranks_while_it_collects(pytester: pytest.Pytester, dist: list[str]) -> None:
    """A lone pytest or an xdist worker starts the ranks of its first run when it collects the first test that
    runs ranks, so the first test finds them started and runs on them."""
    pytester.makepyfile(test_prestart=textwrap.dedent(_PRESTART_RUN))
    out = pytester.path / "out.json"
    env = {k: v for k, v in os.environ.items() if k != FORK_SERVER_VARIABLE} | {"TEPARITY_TEST_OUT": str(out)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *dist, "-p", "teparity.plugin", "-p", "no:cacheprovider",
         f"--basetemp={pytester.path / 'basetemp'}", "test_prestart.py"],
        cwd=pytester.path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    seen = json.loads(out.read_text())
    assert len(seen["started"]) == 2, f"no ranks were started before the first test: {seen}"
    assert sorted(seen["ranks"]) == sorted(seen["started"]), f"the first run did not run on the ranks started early: {seen}"


def test_a_failure_reads_the_same_from_fresh_and_warm_ranks(tmp_path: Path, fork_preload: rank_pool.ForkPreload) -> None:
    """The same raise reads the same whichever launch mode ran it (``bench`` compares evidence across modes): one
    header, the rank's traceback from the task down; how the ranks were launched is in the footer alone."""
    with pytest.raises(RanksFailed) as fresh:
        run_ranks(faults.raise_on_last_rank, "boom", world_size=2, backend="gloo", workdir=tmp_path / "fresh", timeout=120)
    with pytest.raises(RanksFailed) as warm:
        rankpool.warm_ranks(faults.raise_on_last_rank, "boom", world_size=2, backend="gloo", timeout=120,
                            workdir=tmp_path / "warm", fork_preload=fork_preload)
    rankpool.close_pools()

    def evidence(failed: RanksFailed) -> tuple[str, str]:
        """The header and the raising rank's traceback (its peer's gloo error names a port of its own)."""
        return str(failed).splitlines()[0], next(f.detail for f in failed.failures if f.rank == 1)

    assert evidence(fresh.value) == evidence(warm.value)
    assert "_rank_main" not in str(fresh.value) and "_pool_rank_main" not in str(warm.value)
    assert "ValueError: boom" in evidence(fresh.value)[1]
    assert str(fresh.value).splitlines()[-1].startswith("fresh ranks; rank logs: ")
    assert str(warm.value).splitlines()[-1].startswith("warm ranks: the pool is discarded; rank logs: ")
