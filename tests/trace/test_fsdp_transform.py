"""Trace tier, CPU: thunder's FSDP transform against torch's FSDP2, on the ranks, with no TE: the same seeded
Linear-GELU-Linear in fp32 on gloo, rank-dependent inputs that require grad, 2 SGD steps, ZeRO2 and
ZeRO3 (each also with LAYER bucketing); per rank and step the outputs, the input gradients and the full
(gathered) parameter gradients, within torch's float32 tolerance.

The FP8 fsdp tier holds thunder fsdp + TE to torch FSDP2 + eager TE; this check holds the transform itself,
so that an FSDP regression is named as one, on every runner. Regressions it guards: a gradient that is
not reduce-scattered (each rank keeping its own), not averaged, or gathered from the wrong shards.
ZeRO2 is FSDP2's ``reshard_after_forward=False``, ZeRO3 its ``True`` (``teparity.inrank.fsdp_transform``).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest
from packaging.version import Version

from teparity.testing import (
    checks,
    compare_ddp_runs,
    Comparison,
    DdpTransformRun,
    FP32_AGAINST_TORCH,
    fsdp_transform_run,
    FsdpTransformSpec,
    raise_if_ranks_raised,
    StrategyRanks,
    reasons,
    reference,
)

pytestmark = [pytest.mark.multirank]

#: variant -> (sharding, bucketing)
VARIANTS = {"zero2": ("ZERO2", None), "zero3": ("ZERO3", None), "zero2-layer": ("ZERO2", "LAYER"),
            "zero3-layer": ("ZERO3", "LAYER"), "zero2-block": ("ZERO2", "BLOCK"), "zero3-block": ("ZERO3", "BLOCK")}


def _no_cpu_fsdp2(env: Any) -> str | None:
    """Why torch's FSDP2 cannot be the reference here, or None: before torch 2.6 (where fully_shard became
    public) it is ``torch.distributed._composable.fsdp``, whose first forward creates CUDA streams, so it
    needs a GPU (seen on torch 2.4.1 on the CPU: "CUDA driver version is insufficient")."""
    torch = Version(env.versions.torch or "0")
    if torch.release < (2, 6) and not env.gpus:
        return f"torch {env.versions.torch}'s FSDP2 needs a GPU (torch 2.6+ runs it on the CPU): no reference to compare thunder's FSDP transform with"
    return None


@pytest.fixture(scope="module")
def torch_fsdp() -> dict[str, list[DdpTransformRun]]:
    """torch FSDP2's runs per sharding (bucketing is thunder's alone: one reference serves both)."""
    return {}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.shares_runs(lambda params: f"fsdp-transform-torch-{VARIANTS[params['variant']][0]}")  # torch_fsdp's run
@pytest.mark.check(checks.FSDP_TRANSFORM, "{variant}")
def test_fsdp_transform_matches_torch_fsdp(
    variant: str, teparity_env: Any, ranks: StrategyRanks, evidence: Any, numbers: Any,
    torch_fsdp: dict[str, list[DdpTransformRun]],
) -> None:
    if reason := reasons.no_thunder(teparity_env):
        pytest.skip(reason)
    sharding, bucketing = VARIANTS[variant]
    spec = FsdpTransformSpec(sharding=sharding, bucketing=bucketing)
    world_size = ranks.world_size(spec.parallel)
    ctx = (f"{teparity_env.versions.describe()}; thunder fsdp {sharding}, bucketing {bucketing or 'NONE (default)'}, "
           f"thunder's default executors (no TE) against torch FSDP2 fully_shard(reshard_after_forward="
           f"{sharding == 'ZERO3'}); {world_size} gloo ranks on the CPU, fp32, {spec.steps} steps, sizes {spec.sizes}, "
           f"{spec.activation}")
    no_reference = _no_cpu_fsdp2(teparity_env)
    calls = [(fsdp_transform_run, (spec,))]
    if sharding not in torch_fsdp and not no_reference:  # torch's side, once per sharding, beside thunder's
        calls.append(reference(fsdp_transform_run, dataclasses.replace(spec, side="torch", bucketing=None)))
    thunder, *torch_side = ranks.side_by_side(calls)
    if torch_side:
        torch_fsdp[sharding] = torch_side[0]
    raise_if_ranks_raised(thunder, "thunder's FSDP transform", ctx)
    if no_reference:  # after thunder's side: a transform that raises still fails
        pytest.skip(no_reference)
    result = Comparison()
    compare_ddp_runs(torch_fsdp[sharding], thunder, FP32_AGAINST_TORCH, result=result)
    if result.differences:
        pytest.fail(result.message(f"thunder's FSDP transform vs torch FSDP2; {ctx}"), pytrace=False)
    numbers(result)
    collectives = collections.Counter(name.removeprefix("torch_").removesuffix("_prim_impl") for name in thunder[0].backward_collectives)
    evidence(f"{world_size} ranks x {spec.steps} steps, {sharding}, bucketing {bucketing or 'NONE'}, input requires grad, "
             f"full gradients gathered: {result.summary()}; rank 0's backward collectives: {dict(sorted(collectives.items()))}")
