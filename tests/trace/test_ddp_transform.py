"""Trace tier, CPU: thunder's DDP transform against torch DDP, on the ranks, with no TE: the same seeded
Linear-GELU-Linear in fp32, rank-dependent inputs that require grad, 2 SGD steps; per rank and step the
outputs, the input gradients and the all-reduced parameter gradients.

The FP8 ddp tier holds thunder ddp + TE to torch DDP + eager TE; this check holds the transform itself, without a
TE executor, so that a DDP regression is named as one, on every runner and every build that has the transform. Regressions it guards: the 2024 transform
raising on an input that requires grad (known upstream defect ``ddp-transform-rejects-input-grad``), a
gradient that is not all-reduced, or not averaged.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest

from teparity.testing import (
    checks,
    compare_ddp_runs,
    Comparison,
    ddp_transform_run,
    DdpTransformSpec,
    FP32_AGAINST_TORCH,
    raise_if_ranks_raised,
    reasons,
    StrategyRanks,
    reference,
)

pytestmark = pytest.mark.multirank


@pytest.mark.check(checks.DDP_TRANSFORM)
def test_ddp_transform_matches_torch_ddp(teparity_env: Any, ranks: StrategyRanks, evidence: Any, numbers: Any) -> None:
    """thunder's DDP transform with thunder's default executors: no TE executor is needed (nor, where the build has
    one, used), so it runs on every build that has the transform."""
    if reason := reasons.no_thunder(teparity_env):
        pytest.skip(reason)
    spec = DdpTransformSpec(executor=None)
    world_size = ranks.world_size(spec.parallel)
    ctx = (f"{teparity_env.versions.describe()}; thunder ddp with thunder's default executors (linears on the CPU); "
           f"{world_size} ranks, {spec.steps} steps, sizes {spec.sizes}, {spec.activation}")
    thunder, torch_side = ranks.side_by_side(
        [(ddp_transform_run, (spec,)), reference(ddp_transform_run, dataclasses.replace(spec, side="torch"))])
    raise_if_ranks_raised(thunder, "thunder's DDP transform", ctx)
    result = Comparison()
    compare_ddp_runs(torch_side, thunder, FP32_AGAINST_TORCH, result=result)
    if result.differences:
        pytest.fail(result.message(f"thunder's DDP transform vs torch DDP; {ctx}"), pytrace=False)
    numbers(result)
    collectives = collections.Counter(name.removeprefix("torch_").removesuffix("_prim_impl") for name in thunder[0].backward_collectives)
    evidence(f"{world_size} ranks x {spec.steps} steps, input requires grad: {result.summary()}; rank 0's backward "
             f"collectives: {dict(sorted(collectives.items()))}")
