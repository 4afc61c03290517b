"""Trace tier, CPU: thunderfx (torch.compile with thunder as its backend) against eager torch, with no TE: the same seeded
Linear-GELU-Linear in fp32, rank-dependent inputs that require grad, 3 SGD steps, on one rank and under torch DDP on gloo
ranks; per rank and step the outputs, the input gradients and the (all-reduced) parameter gradients, and thunderfx's
programs: one thunder program of the whole network, compiled once.

The FP8 tiers' thunderfx rows hold thunderfx + TE to eager TE on a GPU; this check holds thunderfx itself on every
runner, so that a thunderfx that cannot run (a torch it does not support) or recompiles at every step (each time a
fresh program, whose FP8 state would start over) is named as one. ``teparity.inrank.thunderfx_transform`` runs it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from teparity.testing import (
    checks,
    compare_ddp_runs,
    Comparison,
    FP32_AGAINST_TORCH,
    raise_if_ranks_raised,
    reasons,
    StrategyRanks,
    ThunderfxSpec,
    thunderfx_run,
    reference,
)

#: The report row's parameter -> the strategy the check runs.
VARIANTS = {"1proc": "one-rank", "ddp": "thunderfx-ddp"}


@pytest.mark.multirank
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.check(checks.THUNDERFX_TRANSFORM, "{variant}")
def test_thunderfx_matches_torch(variant: str, teparity_env: Any, ranks: StrategyRanks, evidence: Any, numbers: Any) -> None:
    thunder = teparity_env.versions.thunder
    if reason := reasons.no_thunder(teparity_env) or reasons.feature_absent(None, thunder, recipe_changes=False,
                                                                             compile_path="thunderfx"):
        pytest.skip(reason)
    spec = ThunderfxSpec(strategy=VARIANTS[variant])
    world_size = ranks.world_size(spec.parallel)
    ctx = (f"{teparity_env.versions.describe()}; thunderfx with thunder's default executors ({spec.parallel.words}) "
           f"against eager torch; {world_size} rank(s) on the CPU, fp32, {spec.steps} steps, sizes {spec.sizes}, "
           f"{spec.activation}")
    thunderfx, torch_side = ranks.side_by_side([(thunderfx_run, (spec,)), reference(thunderfx_run, dataclasses.replace(spec, side="torch"))])
    raise_if_ranks_raised(thunderfx, "thunderfx", ctx)
    result = Comparison()
    compare_ddp_runs(torch_side, thunderfx, FP32_AGAINST_TORCH, result=result)
    if result.differences:
        pytest.fail(result.message(f"thunderfx vs eager torch; {ctx}"), pytrace=False)
    compiled = {rank: (run.programs, run.compiles_by_step) for rank, run in enumerate(thunderfx)}
    if any(programs != 1 or any(count not in (1, None) for count in compiles) for programs, compiles in compiled.values()):
        pytest.fail(f"thunderfx made and compiled its programs {compiled} (rank: (programs, compilations after each step)); "
                    f"expected one program compiled once, {(1, (1,) * spec.steps)}: a recompile is a fresh program, its "
                    f"FP8 state started over; {ctx}", pytrace=False)
    numbers(result)
    counted = "compiled once" if None not in thunderfx[0].compiles_by_step else "compilations not counted by this build"
    evidence(f"{world_size} rank(s) x {spec.steps} steps, input requires grad: {result.summary()}; 1 thunder program, {counted}")
