"""Judge a thunder side against an eager side: the checks shared by the numerics and ddp tiers.

Order matters: first that TE ran every linear (a bf16 fallback passes FP8 tolerances), then the trace
invariants that need TE, then outputs and gradients, then the FP8 state. One message lists every
difference, with the configuration.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from teparity import tolerances
from teparity.compare import Comparison, compare_across_ranks, compare_numerics, compare_state
from teparity.parity import CaseRun, SideSpec, fp8_groups
from teparity.traces import (
    Violation,
    assert_no_violations,
    check_backward_sync,
    check_functional_updates,
    check_no_forward_linear_in_backward,
    check_te_claims,
)


def _ran(runs_by_rank: list[list[CaseRun]]) -> list[CaseRun]:
    return [run for runs in runs_by_rank for run in runs if run.error is None]


def case_errors(eager_by_rank: list[list[CaseRun]], thunder_by_rank: list[list[CaseRun]]) -> list[str]:
    """Cases that raised on either side, with the last lines of their tracebacks."""
    errors = []
    for side, runs_by_rank in (("eager", eager_by_rank), ("thunder", thunder_by_rank)):
        for rank, runs in enumerate(runs_by_rank):
            for run in runs:
                if run.error is not None:
                    tail = "\n      ".join(run.error.strip().splitlines()[-4:])
                    errors.append(f"rank {rank} {side} side, case {run.case.label()} raised:\n      {tail}")
    return errors


def assert_te_claimed(thunder_by_rank: list[list[CaseRun]], spec: SideSpec, context: str) -> None:
    """On every run that got as far as a backward, raised later or not: a fallback often raises later."""
    __tracebackhide__ = True
    violations: list[Violation] = []
    for run in (run for runs in thunder_by_rank for run in runs if run.forward is not None):
        violations += check_te_claims(run.forward, run.backward, spec.executor, len(run.linear_names))
    assert_no_violations(violations, f"silent fallback to torch; {context}")


def trace_violations(thunder_by_rank: list[list[CaseRun]], spec: SideSpec) -> list[Violation]:
    """The executor's structural invariants on every rank and case."""
    violations: list[Violation] = []
    for run in _ran(thunder_by_rank):
        n = len(run.linear_names)
        violations += check_no_forward_linear_in_backward(run.backward, spec.executor)
        if spec.executor == "functional":
            violations += check_functional_updates(run.forward, n, max_recipes=1)
            violations += check_functional_updates(run.backward, n, max_recipes=1)
        else:
            violations += check_backward_sync(run.backward, expect_grad_waits=spec.ddp)
            facts = run.legacy_autocast or {}
            if not (facts.get("wrapped") and facts.get("recipe_is_ours")):
                violations.append(
                    Violation("forward-in-fp8-autocast", f"{run.forward.label}: legacy forward autocast facts {facts}", "")
                )
    return violations


def steps_compared_with_eager(spec: SideSpec, world_size: int) -> int:
    """Steps whose numbers and FP8 state are compared with eager TE: all, except under DDP with 3+ ranks.

    There thunder ddp and torch DDP all-reduce the same bf16 gradients in different summation orders
    (4 H200s, NCCL and gloo: scripts/allreduce_probe.py, docs/facts.md), so from step 1 on the two sides
    part for that alone; only step 0 is compared. The thunder side's own checks (TE claims, trace
    invariants, sync counts, FP8 state equal across ranks) still cover every step.
    """
    return spec.steps if not spec.ddp or world_size <= 2 else 1


def compare_sides(
    eager_by_rank: list[list[CaseRun]], thunder_by_rank: list[list[CaseRun]], spec: SideSpec
) -> Comparison:
    """Numerics (TE's tolerance for the recipe) and FP8 state (the executor's rule) on every rank, over
    the steps that ``steps_compared_with_eager`` allows for this world size."""
    result = Comparison()
    tol = tolerances.for_recipe(spec.recipe_id)
    steps = steps_compared_with_eager(spec, len(eager_by_rank))
    for rank, (eager_runs, thunder_runs) in enumerate(zip(eager_by_rank, thunder_by_rank, strict=True)):
        for eager, thunder in zip(eager_runs, thunder_runs, strict=True):
            if eager.error is not None or thunder.error is not None:
                continue  # reported by case_errors
            eager, thunder = (dataclasses.replace(run, steps=run.steps[:steps]) for run in (eager, thunder))
            compare_numerics(eager, thunder, tol, rank=rank, result=result)
            amax_tol, scale_tol = tolerances.state_rules(spec.executor, eager.case.activation)
            for step, (e, t) in enumerate(zip(eager.steps, thunder.steps, strict=True)):
                where = f"rank {rank} case {eager.case.label()} step {step}"
                compare_state(e.fp8_state, t.fp8_state, amax_tol, scale_tol, where=where, result=result)
    return result


def sync_counts(runs_by_rank: list[list[CaseRun]]) -> dict[int, dict[str, list[int]]]:
    return {
        rank: {run.case.label(): [s.backward_syncs for s in run.steps] for run in runs}
        for rank, runs in enumerate(runs_by_rank)
    }


def compiled_entries(runs_by_rank: list[list[CaseRun]]) -> dict[int, dict[str, int | None]]:
    """Cache entries thunder compiled per rank and case (a micro-batch under no-sync compiles its own)."""
    return {rank: {run.case.label(): run.cache_entries for run in runs} for rank, runs in enumerate(runs_by_rank)}


def context(env: Any, spec: SideSpec, world_size: int, backend: str) -> str:
    info = env.executors[spec.executor]
    groups = fp8_groups(world_size, spec.fp8_group_size)
    return (
        f"{env.versions.describe()}; executor {info.label()}; recipe {spec.recipe_id}; "
        f"world size {world_size}, backend {backend}, fp8 groups {groups}, "
        f"{spec.steps} steps x {spec.micro_batches} micro-batch(es)"
    )


def assert_parity(
    eager_by_rank: list[list[CaseRun]], thunder_by_rank: list[list[CaseRun]], spec: SideSpec, ctx: str
) -> Comparison:
    """Every check in order; one message lists every case error and every difference."""
    __tracebackhide__ = True
    assert_te_claimed(thunder_by_rank, spec, ctx)
    assert_no_violations(trace_violations(thunder_by_rank, spec), ctx)
    result = compare_sides(eager_by_rank, thunder_by_rank, spec)
    across = Comparison()
    if len(thunder_by_rank) > 1:
        compare_across_ranks(thunder_by_rank, result=across)
    # Listed first: a rank that raised, then ranks whose FP8 state parted (the amax reduction failed).
    result.differences[:0] = case_errors(eager_by_rank, thunder_by_rank) + across.differences
    assert not result.differences, result.message(f"thunder vs eager TE; {ctx}")
    return result
