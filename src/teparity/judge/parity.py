"""Judge a thunder side against an eager side: the checks shared by the numerics and ddp tiers.

Order matters: first that TE ran every linear (a bf16 fallback passes FP8 tolerances), then the trace
invariants that need TE, then outputs and gradients, then the FP8 state. One message lists every
difference, with the configuration. Failures are ``teparity.judge.failures`` types carrying the evidence
that the known-defect registry matches on.

The reference is eager TE on the executor's own scale-update path (``teparity.records.reference_update``): TE's fused
kernel for the legacy executor (it runs TE's modules), TE's Python update for the functional one.
"""

from __future__ import annotations

from typing import Any

from teparity.judge import tolerances
from teparity.judge.compare import (
    Comparison,
    compare_across_ranks,
    compare_numerics,
    compare_state,
)
from teparity.judge.failures import PartedFromEager, SilentFallback, ThunderRunRaised
from teparity.judge.traces import (
    Violation,
    assert_no_violations,
    check_backward_sync,
    check_cuda_graph_regions,
    check_fp8_state_updates,
    check_functional_updates,
    check_no_forward_linear_in_backward,
    check_te_claims,
    te_linears_held,
    violations_message,
)
from teparity.records import (
    TORCH_LINEARS,
    Case,
    CaseRun,
    Pair,
    PairSpec,
    Snapshot,
    checkpoint_recomputes,
    fp8_groups,
)
from teparity.stack.reasons import no_input_grad_under_ddp


def fused_update_deviation(pair: Pair) -> str:
    """How far thunder is from eager TE's default (fused) update, per step: the measured cost of the two
    update paths, for the report."""
    if pair.eager_fused is None:
        return ""
    result = compare_sides(pair.eager_fused, pair.thunder, pair.spec)
    first = result.first_difference()
    if first is None:
        return "; vs eager TE's fused scale update (not judged): bitwise equal at every step"
    parted = ", ".join(f"{q} {v:.3g}" for q, v in sorted(result.max_abs.items()) if v > 0)
    ulps = ", ".join(f"{q} {v}" for q, v in sorted(result.max_ulps.items()) if v > 0)
    return (
        f"; vs eager TE's fused scale update (not judged): first difference at step {first[0]}"
        f"{'' if first[1] is None else f' micro-batch {first[1]}'}; max|d| {parted or 'none'}; max ulp {ulps or 'none'}"
    )


def _ran(runs_by_rank: list[list[CaseRun]]) -> list[CaseRun]:
    return [run for runs in runs_by_rank for run in runs if run.error is None]


def _raised(eager_by_rank: list[list[CaseRun]], thunder_by_rank: list[list[CaseRun]]) -> list[tuple[int, str, CaseRun]]:
    return [
        (rank, side, run)
        for side, runs_by_rank in (("eager", eager_by_rank), ("thunder", thunder_by_rank))
        for rank, runs in enumerate(runs_by_rank)
        for run in runs
        if run.error is not None
    ]


def raise_if_thunder_raised(thunder_by_rank: list[list[CaseRun]], context: str) -> None:
    """Raise ``ThunderRunRaised`` where any rank's thunder run of any case carries an ``error``."""
    __tracebackhide__ = True
    errors = [{"rank": rank, "error": run.error} for rank, _, run in _raised([], thunder_by_rank)]
    if errors:
        raise ThunderRunRaised(f"the thunder run raised; {context}\n{errors[0]['error']}", errors=errors)


def case_errors(eager_by_rank: list[list[CaseRun]], thunder_by_rank: list[list[CaseRun]]) -> list[str]:
    """Cases that raised on either side, with the last lines of their tracebacks."""
    errors = []
    for rank, side, run in _raised(eager_by_rank, thunder_by_rank):
        lines = run.error.strip().splitlines()
        tail = "\n      ".join(lines[:1] + lines[-4:])  # the exception (first line), then where it was raised
        errors.append(f"rank {rank} {side} side, case {run.case.label()} raised:\n      {tail}")
    return errors


def assert_te_claimed(thunder_by_rank: list[list[CaseRun]], spec: PairSpec, context: str) -> None:
    """On every run that got as far as a backward, raised later or not: a fallback often raises later."""
    __tracebackhide__ = True
    traced = [run for runs in thunder_by_rank for run in runs if run.forward is not None]
    violations: list[Violation] = []
    for run in traced:
        violations += check_te_claims(run.forward, run.backward, spec.executor, run.case.arch.linear_calls(len(run.linear_names)))
    if violations:
        raise SilentFallback(
            violations_message(violations, f"silent fallback to torch; {context}"),
            executor=spec.executor,
            claimed=max(te_linears_held(run.forward, spec.executor) for run in traced),
            linears=max(run.case.arch.linear_calls(len(run.linear_names)) for run in traced),
        )


def trace_violations(thunder_by_rank: list[list[CaseRun]], spec: PairSpec) -> list[Violation]:
    """The executor's structural invariants on every rank and case (activation checkpointing: the
    recomputations ``checkpoint_recomputes`` allows, and the FP8-state invariants per state rather than
    per trace; a forward-only program: no backward to check)."""
    violations: list[Violation] = []
    for run in _ran(thunder_by_rank):
        n = run.case.arch.linear_calls(len(run.linear_names))
        recomputed = checkpoint_recomputes(run.case) if spec.checkpoint else (0, 0)
        if spec.cuda_graphs:
            violations += check_cuda_graph_regions(run.forward)
        if run.backward is not None:
            violations += check_no_forward_linear_in_backward(run.backward, spec.executor, recomputed)
        if spec.executor == "functional":
            per_trace = None if spec.checkpoint else n
            violations += check_functional_updates(run.forward, per_trace, max_recipes=1)
            if run.backward is not None:
                violations += check_functional_updates(run.backward, per_trace, max_recipes=1)
            violations += check_fp8_state_updates(run.forward, run.backward, n)
        else:
            if run.backward is not None:
                violations += check_backward_sync(run.backward, expect_grad_waits=spec.parallel.thunder_ddp)
            facts = run.legacy_autocast or {}
            if not (facts.get("wrapped") and facts.get("recipe_is_ours")):
                violations.append(
                    Violation("forward-in-fp8-autocast", f"{run.forward.label}: legacy forward autocast facts {facts}", "")
                )
    return violations


def steps_compared_with_eager(spec: PairSpec, world_size: int) -> int:
    """Steps whose numbers and FP8 state are compared with eager TE: all, except under DDP with 3+ ranks.

    There thunder ddp and torch DDP all-reduce the same bf16 gradients in different summation orders
    (4 H200s, NCCL and gloo: docs/results/h200-x4-te2.9.0-8fa6f9c, docs/facts.md), so from step 1 on the two sides
    part for that alone; only step 0 is compared. The thunder side's own checks (TE claims, trace
    invariants, sync counts, FP8 state equal across ranks) still cover every step. Under FSDP the
    reduce-scatter of thunder (pre-divided SUM) and torch FSDP2 (AVG) sum in their own orders too.
    """
    return spec.steps if spec.parallel.one_rank or world_size <= 2 else 1


def compare_sides(
    eager_by_rank: list[list[CaseRun]], thunder_by_rank: list[list[CaseRun]], spec: PairSpec
) -> Comparison:
    """Numerics (TE's tolerance for the recipe) and FP8 state (the executor's rule) on every rank, over
    the steps that ``steps_compared_with_eager`` allows for this world size."""
    result = Comparison()
    steps = steps_compared_with_eager(spec, len(eager_by_rank))
    for rank, (eager_runs, thunder_runs) in enumerate(zip(eager_by_rank, thunder_by_rank, strict=True)):
        for eager, thunder in zip(eager_runs, thunder_runs, strict=True):
            if eager.error is not None or thunder.error is not None:
                continue  # reported by case_errors
            eager, thunder = eager.first_steps(steps), thunder.first_steps(steps)
            apart = tolerances.rounds_apart(eager.case, spec)
            decomposed, tight = eager.case.arch.decompositions is not None, tolerances.tightened(len(eager_by_rank))
            tol = tolerances.numerics_rule(spec.recipe_id, spec.executor, eager.case.activation, apart, tight=tight,
                                           decomposed=decomposed)
            if spec.model == TORCH_LINEARS:  # a defect's model without FP8: torch against torch
                tol = tolerances.unquantized_rule(eager.case.dtype, decomposed=decomposed)
            compare_numerics(eager, thunder, tol, rank=rank, result=result)
            amax_tol, scale_tol = tolerances.state_rules(spec.executor, eager.case.activation, apart, tight=tight,
                                                         decomposed=decomposed)
            for step, (e, t) in enumerate(zip(eager.steps, thunder.steps, strict=True)):
                where = f"rank {rank} case {eager.case.label()} step {step}"
                compare_state(e.fp8_state, t.fp8_state, amax_tol, scale_tol, where=where, result=result, step=step)
    return result


def forwards_recorded(snapshot: Snapshot) -> int | None:
    """Forward passes that a step's FP8 state has seen: non-zero rows of its first linear's input amax
    history (one per forward update), or None without state."""
    first = snapshot.get(min(snapshot, default=""), {}).get("input")
    return None if first is None else int(first["amax_history"].ne(0).sum())


def amax_row(snapshot: Snapshot, row: int) -> dict[str, dict[str, float]]:
    """Row ``row`` of every linear's and role's amax history, as floats. TE's update rolls the history up
    by one and zeroes row 0 for the next measurement: after a step, row -1 is the newest amax and row 0
    non-zero means an amax recorded after the step's update."""
    return {linear: {role: float(state["amax_history"][row]) for role, state in roles.items()} for linear, roles in snapshot.items()}


def sync_counts(runs_by_rank: list[list[CaseRun]]) -> dict[int, dict[str, list[int]]]:
    return {
        rank: {run.case.label(): [s.backward_syncs for s in run.steps] for run in runs}
        for rank, runs in enumerate(runs_by_rank)
    }


def compiled_entries(runs_by_rank: list[list[CaseRun]]) -> dict[int, dict[str, int | None]]:
    """Cache entries thunder compiled per rank and case (a micro-batch under no-sync compiles its own)."""
    return {rank: {run.case.label(): run.cache_entries for run in runs} for rank, runs in enumerate(runs_by_rank)}


def left_out(env: Any, spec: PairSpec) -> str:
    """What this build's DDP transform keeps out of the comparison, and why ("" when nothing): the
    ranks' inputs do not require grad where it cannot take one (``reasons.no_input_grad_under_ddp``,
    which the ranks follow too)."""
    reason = no_input_grad_under_ddp(env.versions.thunder) if spec.parallel.thunder_ddp else None
    return f"; input gradients not compared: {reason}" if reason else ""


def context(env: Any, pair: Pair) -> str:
    """The configuration a verdict is about, for its message."""
    spec = pair.spec
    groups = fp8_groups(pair.world_size, spec.fp8_group_size)
    return (
        f"{env.versions.describe()}; executor {env.executors[spec.executor].label()}; recipe {spec.recipe_id}; "
        f"world size {pair.world_size}, backend {pair.backend}, fp8 groups {groups}, "
        f"{spec.steps} steps x {spec.micro_batches} micro-batch(es); eager TE on its {pair.scale_update} scale update"
        f"{left_out(env, spec)}{f'; thunder side: {variant}' if (variant := spec.variant()) else ''}"
    )


def assert_te_held_none(thunder_by_rank: list[list[CaseRun]], spec: PairSpec, context: str) -> None:
    """Where the reference runs every linear in torch (a known defect's model): TE must hold none either."""
    __tracebackhide__ = True
    traced = [run for runs in thunder_by_rank for run in runs if run.forward is not None]
    held = max((te_linears_held(run.forward, spec.executor) for run in traced), default=0)
    if held:
        raise AssertionError(f"TE held {held} linear(s) where the reference runs every linear in torch; {context}")


def assert_te_as_the_reference(thunder_by_rank: list[list[CaseRun]], spec: PairSpec, context: str) -> None:
    """TE claims every linear; where ``spec`` is a defect's model that runs every linear in torch, TE holds none: a
    check judged against such a model does not assert the claim the defect breaks."""
    __tracebackhide__ = True
    if spec.model == TORCH_LINEARS:
        assert_te_held_none(thunder_by_rank, spec, context)
    else:
        assert_te_claimed(thunder_by_rank, spec, context)


def assert_parity(
    eager_by_rank: list[list[CaseRun]], thunder_by_rank: list[list[CaseRun]], spec: PairSpec, ctx: str,
    *, te_claims: bool = True, waived: tuple[str, ...] = (),
) -> Comparison:
    """Every check in order; one message lists every case error and every difference. Against a known defect's
    model: ``te_claims`` False where the model runs every linear in torch (TE must hold none, and the trace
    invariants of TE's linears do not apply), ``waived`` the trace invariants the defect breaks."""
    __tracebackhide__ = True
    if te_claims:
        assert_te_claimed(thunder_by_rank, spec, ctx)
        assert_no_violations([v for v in trace_violations(thunder_by_rank, spec) if v.invariant not in waived], ctx)
    else:
        assert_te_held_none(thunder_by_rank, spec, ctx)
    result = compare_sides(eager_by_rank, thunder_by_rank, spec)
    numeric = len(result.differences)
    across = Comparison()
    if len(thunder_by_rank) > 1:  # within each fp8 group (a model with no reduction has each rank its own), where eager's agree
        compare_across_ranks(thunder_by_rank, result=across, groups=fp8_groups(len(thunder_by_rank), spec.fp8_group_size),
                             reference=eager_by_rank)
    # Listed first: a rank that raised, then ranks whose FP8 state parted (the amax reduction failed).
    result.differences[:0] = case_errors(eager_by_rank, thunder_by_rank) + across.differences
    if not result.differences:
        return result
    sides = {"eager": eager_by_rank[0][0], "thunder": thunder_by_rank[0][0]}
    by_step = {side: [forwards_recorded(step.fp8_state) for step in run.steps] for side, run in sides.items()}
    forwards = {side: steps[0] if steps else None for side, steps in by_step.items()}
    # Ahead of the list of differences, so that a report's evidence (its head) keeps it.
    seen = f"; forward passes in rank 0's step-0 amax history (first case and linear): {forwards}" if spec.micro_batches > 1 else ""
    amaxes = {side: amax_row(run.steps[0].fp8_state, -1) if run.steps else {} for side, run in sides.items()}
    first_linear = {side: by_linear.get(min(by_linear, default=""), {}) for side, by_linear in amaxes.items()}
    seen += f"; rank 0's first case, first linear, newest amaxes after step 0: {first_linear}"
    message = result.message(f"thunder vs eager TE; {ctx}{seen}")
    raise PartedFromEager(
        message,
        case_errors=[{"case": run.case, "side": side, "error": run.error} for _, side, run in _raised(eager_by_rank, thunder_by_rank)],
        numeric_differences=numeric + len(across.differences),
        first_difference=result.first_difference(),
        cache_entries=compiled_entries(thunder_by_rank),
        micro_batches=spec.micro_batches,
        forwards_recorded=forwards,
        forwards_by_step=by_step,
        first_amaxes=amaxes,
        first_pending_amaxes={side: amax_row(run.steps[0].fp8_state, 0) if run.steps else {} for side, run in sides.items()},
        variant=spec.variant(),
        ranks_parted=len(across.differences),
    )
