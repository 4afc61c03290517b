"""FSDP tier: thunder fsdp (``thunder.distributed.fsdp``, ZeRO2 and ZeRO3, with and without bucketing) +
a TE executor against torch FSDP2 (``fully_shard``, ``reshard_after_forward`` False for ZeRO2, True for
ZeRO3) + eager TE, on N ranks with rank-dependent inputs, 3 SGD steps: per rank and step the outputs,
input gradients, full (gathered) parameter gradients and FP8 state; FP8 state equal across ranks; and in
thunder's traces one amax update per TE linear and trace (one per state per step) issued in one order
with FSDP's collectives on every rank (an order that cannot deadlock).

The sides are ``teparity.inrank.fsdp_sides``; ``judge.parity`` judges them as it judges the ddp tier's.
"""

from __future__ import annotations

from typing import Any

import pytest

from teparity import checks
from teparity.gate.pairs import Pairs
from teparity.judge.fsdp_order import order_differences, placement
from teparity.judge.parity import fused_update_deviation, steps_compared_with_eager, sync_counts
from teparity.records import Case, PairSpec
from teparity.stack import reasons

pytestmark = [pytest.mark.fp8, pytest.mark.multirank]
EXECUTORS = ["legacy", "functional"]
#: bf16 parameters as in the ddp tier; linears only, so that every tensor TE sees is equal on both sides.
CASES = (
    Case(activation=None, dtype="bfloat16"),
    Case(sizes=(48, 64, 32, 16), bias=False, lead_shape=(2, 8), activation=None, dtype="bfloat16", seed=1),
)
#: variant -> (thunder's sharding strategy, its bucketing strategy; None: fsdp's default, NONE)
VARIANTS = {
    "zero2": ("ZERO2", None), "zero3": ("ZERO3", None),
    "zero2-layer": ("ZERO2", "LAYER"), "zero3-layer": ("ZERO3", "LAYER"),
    "zero2-block": ("ZERO2", "BLOCK"), "zero3-block": ("ZERO3", "BLOCK"),
}


def _skip_unless_runnable(env: Any, backend: str, world_size: int) -> None:
    if world_size < 2:
        pytest.skip(f"FSDP shards over 2+ ranks; world size is {world_size} (--teparity-world-size)")
    if reason := reasons.fsdp_backend_unfit(backend, len(env.gpus)):
        pytest.skip(reason)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FSDP, "{variant}")
def test_fsdp_matches_torch_fsdp(executor: str, variant: str, parity: Pairs, world_size: int, backend: str) -> None:
    _skip_unless_runnable(parity.env, backend, world_size)
    sharding, bucketing = VARIANTS[variant]
    spec = PairSpec(executor, "delayed", CASES, steps=3, fsdp=sharding, fsdp_bucketing=bucketing)
    pair = parity.run(spec, world_size=world_size, measure_fused=True)
    ctx = (f"{parity.context(pair)}; thunder fsdp {sharding}, bucketing {bucketing or 'NONE'} against torch FSDP2 "
           f"fully_shard(reshard_after_forward={sharding == 'ZERO3'})")
    result = parity.assert_parity(pair, ctx)
    if executor == "legacy":
        counts = sync_counts(pair.thunder)
        wrong = {r: c for r, by_case in counts.items() for c in by_case.values() if c != [1] * spec.steps}
        assert not wrong, f"backward syncs per step should be 1 on every rank and case, got {counts}; {ctx}"
    if differences := order_differences(pair.thunder):
        pytest.fail("\n".join([f"{len(differences)} rank(s) part in the order of collectives; {ctx}", *differences]),
                    pytrace=False)
    shape = f"{len(spec.cases)} cases x {spec.steps} steps"
    if (compared := steps_compared_with_eager(spec, world_size)) < spec.steps:
        shape += f", compared with eager TE at the first {compared} step(s) (3+ ranks reduce in another order)"
    parity.evidence(f"{world_size} ranks ({pair.backend}), {sharding}, bucketing {bucketing or 'NONE'}, {shape}: "
                    f"{result.summary()}; one order of collectives on every rank, rank 0's {placement(pair.thunder)}"
                    f"{fused_update_deviation(pair)}")
