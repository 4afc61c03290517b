"""On an FP8 GPU: each numerics / ddp check fails under a mutation of the real run, and a rank whose
backward skips the FP8 sync fails the run within the deadline with every rank's stack."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from teparity.killmatrix import run_gate
from teparity.parity import Case, SideSpec
from teparity.ranks import STACK_DUMP_WAIT_S, RanksFailed, run_ranks
from teparity.scenarios import legacy_ddp_with_sync_skipped_on_last_rank

pytestmark = [pytest.mark.fp8, pytest.mark.multirank]
REPO = Path(__file__).resolve().parents[2]
NUMERICS = "tests/numerics/test_numerics_parity.py::test_thunder_matches_eager_te"
DDP = "tests/ddp/test_ddp_parity.py::test_ddp_matches_torch_ddp"

#: mutation -> (tests that must fail, any of these lines must be in the output)
KILLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "legacy-scale-perturbed": ((f"{NUMERICS}[legacy-delayed]",), (" scale differs (rule: bitwise",)),
    "sync-missing": ((f"{NUMERICS}[legacy-delayed]",), ("found 0 (none)",)),
    "functional-scale-perturbed": ((f"{NUMERICS}[functional-delayed]",), (" scale: Tensor-likes are not close",)),
    "functional-amax-update-dropped": ((f"{NUMERICS}[functional-delayed]",), ("amax_history differs",)),
    "checker-declines": ((f"{NUMERICS}[legacy-delayed]", f"{NUMERICS}[functional-delayed]"), ("silent fallback",)),
    "functional-no-cross-rank-reduction": ((f"{DDP}[functional-delayed]",), ("amax_history differs",)),
    "first-module-token-kept": ((f"{DDP}[legacy-delayed]",), ("backward syncs per step", "amax_history differs")),
    "sync-after-return": ((f"{DDP}[legacy-delayed]",), ("comes after the return",)),
}


@pytest.fixture(autouse=True)
def _in_the_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def test_the_clean_run_of_every_killing_test_passes(tmp_path: Path) -> None:
    """A kill counts only if the same tests pass without the mutation."""
    tests = sorted({t for killing, _ in KILLS.values() for t in killing})
    run = run_gate(tests, tmp_path, None, ["-p", "no:xdist"])
    assert run.returncode == 0, run.output[-6000:]


@pytest.mark.parametrize("mutation", sorted(KILLS))
def test_the_gpu_tiers_kill(mutation: str, tmp_path: Path) -> None:
    tests, lines = KILLS[mutation]
    run = run_gate(list(tests), tmp_path, mutation, ["-p", "no:xdist"])
    assert run.returncode == 1, f"exit {run.returncode}: the mutant survived?\n{run.output[-4000:]}"
    assert any(line in run.output for line in lines), run.output[-4000:]
    survived = [t for t in tests if t not in run.failed_tests()]
    assert not survived, f"{mutation} survived {survived}; failed: {sorted(run.failed_tests())}"


def test_a_rank_without_the_backward_sync_fails_fast_with_every_stack(tmp_path: Path, backend: str) -> None:
    deadline = 90.0
    spec = SideSpec("thunder", "legacy", "delayed", (Case(),), steps=2, ddp=True)
    start = time.monotonic()
    with pytest.raises(RanksFailed) as failed:
        run_ranks(legacy_ddp_with_sync_skipped_on_last_rank, spec, world_size=2, backend=backend,
                  timeout=deadline, pg_timeout=600, workdir=tmp_path)
    elapsed = time.monotonic() - start
    assert elapsed < deadline + STACK_DUMP_WAIT_S + 60, f"took {elapsed:.0f} s"
    by_rank = {f.rank: f for f in failed.value.failures}
    assert sorted(by_rank) == [0, 1], str(failed.value)
    assert all(f.detail.strip() and "File " in f.detail for f in by_rank.values()), str(failed.value)
    assert "reduce_and_update_fp8_tensors" in by_rank[0].detail or "te_sync_fp8_meta_bwd" in by_rank[0].detail, str(failed.value)
