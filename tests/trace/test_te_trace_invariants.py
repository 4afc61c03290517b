"""Trace tier, on an FP8 GPU: the invariants of each TE executor's traces, from one thunder training run
(no eager side, no numerics): TE claims every linear; no forward TE linear recomputed in the backward;
legacy: the forward wrapped in fp8_autocast with our recipe and the backward sync placed right; functional:
one amax/scale update per TE linear in forward and in backward, all before the return, one recipe per trace.

These pass or fail on the traces alone, so they stay meaningful where the numerics of an executor do not
match (a regression of the traces is then still caught and named).
"""

from __future__ import annotations

from typing import Any

import pytest

from teparity.testing import (
    assert_no_violations,
    assert_te_claimed,
    Case,
    checks,
    PairSpec,
    raise_if_thunder_raised,
    StrategyRanks,
    reasons,
    run_thunder,
    trace_violations,
)

pytestmark = pytest.mark.fp8
#: bf16 parameters, three linears, a 3-D input: every executor runs it on TE 2.9 and later.
CASE = Case(sizes=(48, 64, 32, 16), bias=False, lead_shape=(2, 8), activation=None, dtype="bfloat16")


@pytest.mark.parametrize("executor", ["legacy", "functional"])
@pytest.mark.check(checks.TE_TRACE_INVARIANTS, "1proc")
def test_te_trace_invariants(executor: str, teparity_env: Any, ranks: StrategyRanks, evidence: Any) -> None:
    if reason := reasons.no_executor(teparity_env, executor):
        pytest.skip(reason)
    spec = PairSpec(executor, "delayed", (CASE,), steps=2)
    thunder = ranks(run_thunder, spec)
    ctx = f"{teparity_env.versions.describe()}; executor {teparity_env.executors[executor].label()}; recipe delayed, 1 process"
    run = thunder[0][0]
    assert_te_claimed(thunder, spec, ctx)
    raise_if_thunder_raised(thunder, ctx)
    assert_no_violations(trace_violations(thunder, spec), ctx)
    evidence(f"{len(run.linear_names)} linears: forward {len(run.forward.rows)} symbols, backward {len(run.backward.rows)}")
