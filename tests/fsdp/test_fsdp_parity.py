"""FSDP tier: thunder fsdp (``thunder.distributed.fsdp``, ZeRO2 and ZeRO3, with and without bucketing) and torch FSDP2
around thunderfx, with and without activation checkpointing, + a TE executor against eager TE under a reference that
runs where the gate runs, on N ranks with rank-dependent inputs: per rank and
step the outputs, input gradients, full (gathered) parameter gradients and FP8 state; FP8 state equal across ranks;
and in thunder's traces one amax update per TE linear and trace (one per state per step) issued in one order with
FSDP's collectives on every rank (an order that cannot deadlock).

The reference (``teparity.inrank.strategies.thunder_fsdp``): torch FSDP2 (``fully_shard``) + eager TE where every rank has a GPU
of its own (NCCL); torch DDP + eager TE where FSDP2 over ``te.Linear`` cannot run (gloo ranks sharing one GPU, where
it dies of SIGSEGV): thunder's FSDP averages gradients and gathers full parameters as DDP keeps them, so every
gathered gradient and parameter must be DDP's. The header and each test's evidence say which ran.
"""

from __future__ import annotations

from typing import Any

import pytest

from teparity.testing import (
    Case,
    checks,
    Comparison,
    fused_update_deviation,
    order_differences,
    Pair,
    Pairs,
    PairSpec,
    placement,
    REFERENCES,
    steps_compared_with_eager,
    sync_counts,
)

pytestmark = [pytest.mark.fp8, pytest.mark.multirank]
EXECUTORS = ["legacy", "functional"]
#: bf16 parameters as in the ddp tier; linears only, so that every tensor TE sees is equal on both sides.
CASES = (
    Case(activation=None, dtype="bfloat16"),
    Case(sizes=(48, 64, 32, 16), bias=False, lead_shape=(2, 8), activation=None, dtype="bfloat16", seed=1),
)
#: A llama-style block (tests/features' LLAMA) under FSDP, as thunder's own FSDP + TE test trains a llama block.
LLAMA = (Case(sizes=(64, 128, 64), lead_shape=(2, 16), dtype="float32", architecture="llama", seed=4),)
#: variant -> (thunder's sharding strategy, its bucketing strategy; None: fsdp's default, NONE)
VARIANTS = {
    "zero2": ("ZERO2", None), "zero3": ("ZERO3", None),
    "zero2-layer": ("ZERO2", "LAYER"), "zero3-layer": ("ZERO3", "LAYER"),
    "zero2-block": ("ZERO2", "BLOCK"), "zero3-block": ("ZERO3", "BLOCK"),
}
SHARDINGS = {"zero2": "ZERO2", "zero3": "ZERO3"}
#: Recipe variants (variant -> sharding, recipe): E4M3 both ways and a history of 4 with the max algorithm, over 5 steps
#: so that the history rolls over, the amaxes reduced in FSDP's backward order.
RECIPE_VARIANTS = {f"{variant}-e4m3-len4-max": (sharding, "delayed-e4m3-len4-max") for variant, sharding in SHARDINGS.items()}
RECIPE_VARIANT_STEPS = 5


def _spec(executor: str, cases: tuple[Case, ...], sharding: str, bucketing: str | None, recipe_id: str = "delayed",
          **more: Any) -> PairSpec:
    """thunder fsdp; its reference is the one that runs on the session's backend (``Strategy.reference``)."""
    return PairSpec(executor, recipe_id, cases, strategy="thunder-fsdp", sharding=sharding, bucketing=bucketing, **more)


def _strategy(spec: PairSpec) -> str:
    """The sharding strategy in words: what shards, how, and thunder's bucketing where it buckets."""
    bucketing = f", bucketing {spec.bucketing or 'NONE'}" if "bucketing" in spec.parallel.options else ""
    return f"{spec.parallel.words} {spec.sharding}{bucketing}"


def _assert_fsdp_parity(pair: Pair, parity: Pairs) -> None:
    """Every check of the numerics tier, the legacy sync once per backward, one order of collectives on every rank."""
    __tracebackhide__ = True
    spec, world_size = pair.spec, pair.world_size
    ctx = f"{parity.context(pair)}; {_strategy(spec)} against {REFERENCES[spec.parallel.sharded_reference(spec)]}"

    def verdict(judged: Pair) -> Comparison:
        """The pair against its reference, then what thunder alone must hold (TE's syncs where TE runs)."""
        result = parity.assert_parity(judged, ctx)
        model = (entry := judged.judged_against) and entry.model
        if spec.executor == "legacy" and not (model and not model.te_claims):
            counts = sync_counts(judged.thunder)
            wrong = {r: c for r, by_case in counts.items() for c in by_case.values() if c != [spec.micro_batches] * spec.steps}
            assert not wrong, f"backward syncs per step should be {spec.micro_batches} on every rank and case, got {counts}; {ctx}"
        if differences := order_differences(judged.thunder):
            raise AssertionError("\n".join([f"{len(differences)} rank(s) part in the order of collectives; {ctx}", *differences]))
        return result

    result = parity.judge_against_te_or_model(pair, verdict)
    shape = f"{len(spec.cases)} cases x {spec.steps} steps x {spec.micro_batches} micro-batch(es)"
    if (compared := steps_compared_with_eager(spec, world_size)) < spec.steps:
        shape += f", compared with eager TE at the first {compared} step(s) (3+ ranks reduce in another order)"
    parity.evidence(f"{world_size} ranks ({pair.backend}), {_strategy(spec)}, against {REFERENCES[spec.parallel.sharded_reference(spec)]}, {shape}: {result.summary()}; one order of collectives on every "
                    f"rank, rank 0's {placement(pair.thunder)}{fused_update_deviation(pair)}")


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FSDP, "{variant}")
def test_fsdp_matches_the_reference(executor: str, variant: str, parity: Pairs) -> None:
    spec = _spec(executor, CASES, *VARIANTS[variant], steps=3)
    _assert_fsdp_parity(parity.run(spec, measure_fused=True), parity)


@pytest.mark.parametrize("variant", list(RECIPE_VARIANTS))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FSDP, "{variant}")
def test_fsdp_with_another_recipe_matches_the_reference(executor: str, variant: str, parity: Pairs) -> None:
    sharding, recipe_id = RECIPE_VARIANTS[variant]
    spec = _spec(executor, CASES, sharding, None, recipe_id, steps=RECIPE_VARIANT_STEPS)
    _assert_fsdp_parity(parity.run(spec), parity)


@pytest.mark.parametrize("sharding", list(SHARDINGS))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FSDP_LLAMA, "{sharding}")
def test_llama_block_under_fsdp_matches_the_reference(executor: str, sharding: str, parity: Pairs) -> None:
    """A llama-style block, every projection TE-claimed; two steps, as tests/features' llama-block (why there)."""
    spec = _spec(executor, LLAMA, SHARDINGS[sharding], None, steps=2)
    _assert_fsdp_parity(parity.run(spec), parity)


@pytest.mark.parametrize("sharding", list(SHARDINGS))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FSDP_GRAD_ACCUMULATION, "{sharding}")
def test_gradient_accumulation_under_fsdp_matches_the_reference(executor: str, sharding: str, parity: Pairs) -> None:
    """Two micro-batches per step, the first under thunder's ``skip_data_parallel_grad_sync`` (the reference's
    ``no_sync`` / ``set_requires_gradient_sync(False)``)."""
    spec = _spec(executor, CASES[:1], SHARDINGS[sharding], None, steps=2, micro_batches=2)
    _assert_fsdp_parity(parity.run(spec), parity)


@pytest.mark.parametrize("sharding", list(SHARDINGS))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FSDP2_THUNDERFX, "{sharding}")
def test_fsdp2_around_thunderfx_matches_the_reference(executor: str, sharding: str, parity: Pairs) -> None:
    """torch FSDP2 (``fully_shard``) around a module thunderfx compiles, as thunder's benchmark_litgpt ``fsdp2`` mode:
    TE must hold every linear although FSDP2's parameters are ``DTensor``s, and thunder must compile one program (a
    recompile at an FSDP2 hook starts its FP8 state over)."""
    spec = PairSpec(executor, "delayed", CASES, steps=3, strategy="thunderfx-fsdp2", sharding=SHARDINGS[sharding])
    _assert_fsdp_parity(parity.run(spec), parity)


#: variant -> (strategy, its sharding): thunder fsdp either way, torch FSDP2 around thunderfx.
#: Its cases: the one whose region recomputes a linear first (the registry's signatures read rank 0's first case; the
#: other's region is one linear that thunder.jit saves).
CHECKPOINTED = {
    "zero2": ("thunder-fsdp", "ZERO2"), "zero3": ("thunder-fsdp", "ZERO3"), "fsdp2-thunderfx-zero3": ("thunderfx-fsdp2", "ZERO3"),
}


@pytest.mark.parametrize("variant", list(CHECKPOINTED))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FSDP_ACTIVATION_CHECKPOINTING, "{variant}")
def test_fsdp_with_activation_checkpointing_matches_the_reference_without(executor: str, variant: str,
                                                                          parity: Pairs) -> None:
    """The thunder side's layers before the last linear under ``torch.utils.checkpoint`` (thunder #1424: FSDP + FP8 +
    checkpointing raised ``KeyError 'scaling_fwd'``), against the reference without checkpointing: every number, one FP8
    update per state per step (the trace invariants per state), the FP8 state equal across ranks."""
    strategy, sharding = CHECKPOINTED[variant]
    spec = PairSpec(executor, "delayed", CASES[::-1], steps=3, strategy=strategy, sharding=sharding, checkpoint=True)
    _assert_fsdp_parity(parity.run(spec), parity)
