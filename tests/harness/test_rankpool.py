"""Warm ranks: a run in a warm pool gives what fresh ranks give, starts in well under a second, and keeps
every guarantee of fresh ranks (failures with evidence, deadlines, stacks, no orphans)."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import pytest

from teparity.inrank import faults
from teparity.inrank.scenarios import LegacySyncSpec, legacy_sync_run
from teparity.launch import pool as rankpool
from teparity.launch.fresh import run_ranks
from teparity.launch.outcome import STACK_DUMP_WAIT_S, RanksFailed

pytestmark = pytest.mark.multirank


@pytest.fixture
def pool(tmp_path: Path):
    pool = rankpool.RankPool(2, "gloo", 30.0, tmp_path)
    yield pool
    pool.close()
    assert not faults.still_running(pool.pids), "warm ranks outlived their pool"


def test_a_warm_side_starts_in_under_a_second_where_fresh_ranks_take_seconds(pool: rankpool.RankPool, tmp_path: Path) -> None:
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


def test_a_side_after_other_sides_gives_the_bytes_fresh_ranks_give(pool: rankpool.RankPool, tmp_path: Path) -> None:
    """What couples two sides in a process is reset between them (the CPU trace tier's side here; on a GPU
    the same holds for TE's global FP8 state, checked by ``python -m teparity bench``)."""
    single, ddp = LegacySyncSpec(steps=2, device="cpu", ddp=False), LegacySyncSpec(steps=2, device="cpu", ddp=True)
    fresh = run_ranks(legacy_sync_run, ddp, world_size=2, backend="gloo", workdir=tmp_path)
    pool.run(legacy_sync_run, (single,), timeout=120)
    pool.run(legacy_sync_run, (ddp,), timeout=120)
    warm = pool.run(legacy_sync_run, (ddp,), timeout=120)
    assert pickle.dumps(warm) == pickle.dumps(fresh)


def test_a_raising_rank_discards_the_pool_with_its_traceback(tmp_path: Path) -> None:
    first = rankpool.warm_ranks(faults.sum_of_ranks, world_size=2, backend="gloo", timeout=120, workdir=tmp_path)
    assert first == [(0, 2, 1), (1, 2, 1)]
    (pool,) = rankpool._POOLS.values()
    with pytest.raises(RanksFailed) as failed:
        rankpool.warm_ranks(faults.raise_on_last_rank, "boom", world_size=2, backend="gloo", timeout=120, workdir=tmp_path)
    by_rank = {f.rank: f for f in failed.value.failures}
    assert by_rank[1].kind == "raised" and "ValueError: boom" in by_rank[1].detail
    assert "the pool is discarded" in str(failed.value)
    assert not rankpool._POOLS and not faults.still_running(pool.pids)
    again = rankpool.warm_ranks(faults.sum_of_ranks, world_size=2, backend="gloo", timeout=120, workdir=tmp_path)
    assert again == first and set(rankpool._POOLS[next(iter(rankpool._POOLS))].pids).isdisjoint(pool.pids)
    rankpool.close_pools()


def test_a_killed_warm_rank_reports_its_signal(pool: rankpool.RankPool) -> None:
    with pytest.raises(RanksFailed) as failed:
        pool.run(faults.kill_last_rank, (), timeout=120)
    assert {f.rank: f.summary for f in failed.value.failures}[1] == "killed by signal SIGKILL"


def test_a_warm_hang_fails_within_the_deadline_with_every_stack(pool: rankpool.RankPool) -> None:
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
    rankpool.warm_ranks(faults.sum_of_ranks, world_size=1, backend="gloo", timeout=120, workdir=tmp_path)
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "1")  # ranks inherit the environment at their start
    rankpool.warm_ranks(faults.sum_of_ranks, world_size=1, backend="gloo", timeout=120, workdir=tmp_path)
    pools = list(rankpool._POOLS.values())
    assert len(pools) == 2
    rankpool.close_pools()
    assert not rankpool._POOLS and not faults.still_running(pid for p in pools for pid in p.pids)
