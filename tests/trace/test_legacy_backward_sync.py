"""Trace tier: the legacy TE executor's backward FP8 sync is in the backward trace once, right before the
return (after every gradient all-reduce wait under DDP, every reduce-scatter wait under FSDP ZeRO2 and
ZeRO3), never in the forward, and runs once per backward.

Regressions this guards: thunder PR #591 (the sync appended after the return, so it never ran), a
missing or duplicated sync, and a sync that TE's own per-module sync doubles.
"""

from __future__ import annotations

from typing import Any

import pytest

from teparity.testing import (
    assert_no_violations,
    check_backward_sync,
    check_no_forward_sync,
    checks,
    legacy_sync_run,
    LegacySyncRun,
    LegacySyncSpec,
    reasons,
    SilentFallback,
    StrategyRanks,
    SyncCountWrong,
)

pytestmark = [pytest.mark.legacy_sync, pytest.mark.parametrize("executor", ["legacy"])]
STEPS = 3


def _spec(env: Any, **strategy: Any) -> LegacySyncSpec:
    """On an FP8 GPU with TE the linears really go to TE; elsewhere the trace is built on the CPU."""
    return LegacySyncSpec(steps=STEPS, device="cpu" if reasons.no_fp8(env) else "cuda", **strategy)


def _context(env: Any, runs: list[LegacySyncRun]) -> str:
    return f"{env.versions.describe()}; {env.executors['legacy'].label()}; sync counted by {runs[0].recorder_mode}"


@pytest.fixture(scope="module")
def single_process(teparity_env: Any, ranks: StrategyRanks) -> list[LegacySyncRun]:
    return ranks(legacy_sync_run, _spec(teparity_env))


#: The multi-rank scenarios: thunder's DDP, and its FSDP with ZeRO2 and ZeRO3 sharding.
PARALLEL = {"ddp": {"strategy": "thunder-ddp"}, "fsdp-zero2": {"strategy": "thunder-fsdp", "sharding": "ZERO2"},
            "fsdp-zero3": {"strategy": "thunder-fsdp", "sharding": "ZERO3"}}


@pytest.fixture(scope="module", params=sorted(PARALLEL))
def parallel(request: pytest.FixtureRequest, teparity_env: Any, ranks: StrategyRanks) -> list[LegacySyncRun]:
    """The ranks of one scenario: under FSDP as under DDP, the sync must come last, after every gradient
    collective's wait (all-reduce under DDP, reduce-scatter under FSDP)."""
    return ranks(legacy_sync_run, _spec(teparity_env, **PARALLEL[request.param]))


def _assert_placement(env: Any, runs: list[LegacySyncRun], *, ddp: bool, evidence: Any) -> None:
    violations = [v for run in runs for v in check_backward_sync(run.backward, expect_grad_waits=ddp)]
    assert_no_violations(violations, _context(env, runs), ranks=len(runs))
    run = runs[0]
    sync, ret = run.backward.indices("backward_sync")[0], run.backward.indices("return")[0]
    waits = run.backward.indices("grad_wait")
    evidence(f"{len(runs)} rank(s): sync at {sync}, return at {ret}, last grad wait at {waits[-1] if waits else '-'}")


def _assert_runs_once(env: Any, runs: list[LegacySyncRun], evidence: Any) -> None:
    counts = {rank: run.backward_syncs_per_step for rank, run in enumerate(runs)}
    expected = (1,) * STEPS
    if wrong := {rank: c for rank, c in counts.items() if c != expected}:
        raise SyncCountWrong(
            f"backward syncs per step (reduce_and_update_fp8_tensors(forward=False) calls) should be {expected} "
            f"on every rank; got {wrong} (all ranks: {counts}); {_context(env, runs)}",
            counts=counts, expected=expected,
        )
    evidence(f"{len(runs)} rank(s) x {STEPS} steps: 1 sync per backward ({runs[0].recorder_mode})")


#: The checks of one scenario judge one run of it (a module-scoped fixture): under -n, one worker runs them.
ONE_PROCESS = pytest.mark.shares_runs("legacy-sync-1proc")
ON_THE_RANKS = pytest.mark.shares_runs("legacy-sync-{parallel}")


@ONE_PROCESS
@pytest.mark.check(checks.BWD_SYNC_PLACEMENT, "1proc")
def test_backward_sync_placement(executor: str, teparity_env: Any, single_process: list[LegacySyncRun], evidence: Any) -> None:
    _assert_placement(teparity_env, single_process, ddp=False, evidence=evidence)


@ONE_PROCESS
@pytest.mark.check(checks.FWD_HAS_NO_SYNC, "1proc")
def test_no_sync_in_forward(executor: str, teparity_env: Any, single_process: list[LegacySyncRun], evidence: Any) -> None:
    assert_no_violations(check_no_forward_sync(single_process[0].forward), _context(teparity_env, single_process))
    evidence(f"forward trace: {len(single_process[0].forward.rows)} symbols, no sync")


@ONE_PROCESS
@pytest.mark.check(checks.BWD_SYNC_RUNS_ONCE, "1proc")
def test_sync_runs_once_per_backward(executor: str, teparity_env: Any, single_process: list[LegacySyncRun], evidence: Any) -> None:
    _assert_runs_once(teparity_env, single_process, evidence)


@pytest.mark.multirank
@ON_THE_RANKS
@pytest.mark.check(checks.BWD_SYNC_PLACEMENT, "{parallel}")
def test_backward_sync_placement_on_the_ranks(executor: str, teparity_env: Any, parallel: list[LegacySyncRun], evidence: Any) -> None:
    _assert_placement(teparity_env, parallel, ddp=True, evidence=evidence)


@pytest.mark.multirank
@ON_THE_RANKS
@pytest.mark.check(checks.FWD_HAS_NO_SYNC, "{parallel}")
def test_no_sync_in_forward_on_the_ranks(executor: str, teparity_env: Any, parallel: list[LegacySyncRun], evidence: Any) -> None:
    violations = [v for run in parallel for v in check_no_forward_sync(run.forward)]
    assert_no_violations(violations, _context(teparity_env, parallel))
    evidence(f"{len(parallel)} rank(s): no sync in the forward trace")


@pytest.mark.multirank
@ON_THE_RANKS
@pytest.mark.check(checks.BWD_SYNC_RUNS_ONCE, "{parallel}")
def test_sync_runs_once_per_backward_on_the_ranks(executor: str, teparity_env: Any, parallel: list[LegacySyncRun], evidence: Any) -> None:
    _assert_runs_once(teparity_env, parallel, evidence)


@pytest.mark.fp8
@ONE_PROCESS
@pytest.mark.check(checks.TE_CLAIMS_EVERY_LINEAR, "1proc")
def test_te_claims_every_linear(executor: str, teparity_env: Any, single_process: list[LegacySyncRun], evidence: Any) -> None:
    """On an FP8 GPU the sync tests above mean something only if TE, not torch, ran the linears."""
    run = single_process[0]
    n_linears = len(LegacySyncSpec().sizes) - 1
    te_linears = [name for name in run.forward_linear_symbols if name.startswith("te_linear")]
    if len(te_linears) != n_linears:
        raise SilentFallback(
            f"the legacy TE executor claimed {len(te_linears)} of {n_linears} linears: silent fallback to torch; "
            f"forward linear symbols: {list(run.forward_linear_symbols)}; {_context(teparity_env, single_process)}",
            executor=executor, claimed=len(te_linears), linears=n_linears,
        )
    evidence(f"forward linears: {te_linears}")
