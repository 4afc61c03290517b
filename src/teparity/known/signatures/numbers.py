"""The signatures of defects whose numbers part from eager TE's (``PartedFromEager``, no case raised): predicates
over where the first difference falls, how many forward passes each side's amax history records, the amaxes and the
cache entries, each with its signature below."""

from __future__ import annotations

from teparity.judge.failures import PartedFromEager, PartedFromEagerEvidence
from teparity.known.defect import Signature
from teparity.stack.environment import Environment


def _forwards_by_step(evidence: PartedFromEagerEvidence) -> tuple[list[int | None], list[int | None]]:
    """(thunder's, eager TE's) forward passes recorded by step in rank 0's first case and linear."""
    by_step = evidence["forwards_by_step"] or {}
    return by_step.get("thunder") or [], by_step.get("eager") or []


def _states_on_thunders_side_only(evidence: PartedFromEagerEvidence) -> set[str]:
    """The linears (rank 0's first case) with an FP8 state after step 0 on thunder's side and none on eager TE's."""
    amaxes = evidence["first_amaxes"] or {}
    return set(amaxes.get("thunder") or ()) - set(amaxes.get("eager") or ())


def _fp8_state_per_cache_entry(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    micro = evidence["micro_batches"]
    entries = [n for by_case in (evidence["cache_entries"] or {}).values() for n in by_case.values()]
    forwards = evidence["forwards_recorded"] or {}
    return (
        micro > 1
        and not evidence["case_errors"]
        and bool(entries) and all(n == 2 for n in entries)
        and evidence["first_difference"] is not None and evidence["first_difference"][0] == 0
        and (evidence["first_difference"][1] or 0) >= 1
        and forwards.get("thunder", 0) < forwards.get("eager", 0)
    )


def _parted_from_step_zero_of_micro_batches(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    first = evidence["first_difference"]
    return (evidence["micro_batches"] > 1 and not evidence["case_errors"] and evidence["numeric_differences"] > 0
            and first is not None and first[0] == 0)


def _state_restarts_each_step(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    thunder, eager = _forwards_by_step(evidence)
    first = evidence["first_difference"]
    return (
        not evidence["case_errors"]
        and len(thunder) > 1 and all(n == 1 for n in thunder)
        and len(eager) == len(thunder) and eager[-1] > 1
        and first is not None and first[0] == 1
    )


def _fp8_where_off(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """No case raised, and thunder's FP8 state shows FP8 where eager TE's shows none: after step 0 a linear with an
    FP8 state on thunder's side only, or at the first difference more forward passes in thunder's history."""
    only_thunder = _states_on_thunders_side_only(evidence)
    thunder, eager = _forwards_by_step(evidence)
    first = evidence["first_difference"]
    more = first is not None and first[0] < min(len(thunder), len(eager)) and (thunder[first[0]] or 0) > (eager[first[0]] or 0)
    return not evidence["case_errors"] and first is not None and (bool(only_thunder) or more)


def _bf16_copies_quantized(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Linear "0" (fed the fp32 input): thunder's step-0 input and weight amaxes are eager TE's rounded
    to bfloat16, and at least one of them differs from eager's."""
    import torch

    amaxes = evidence["first_amaxes"] or {}
    eager, thunder = (amaxes.get(side, {}).get("0", {}) for side in ("eager", "thunder"))
    roles = ("input", "weight")
    if not set(roles) <= eager.keys() & thunder.keys():
        return False
    rounded = {role: float(torch.tensor(eager[role]).to(torch.bfloat16).float()) for role in roles}
    return (
        not evidence["case_errors"]
        and all(thunder[role] == rounded[role] for role in roles)
        and any(thunder[role] != eager[role] for role in roles)
    )


def _recompute_records_amax_again(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Under checkpointing: after step 0, thunder's first (recomputed) linear holds an input amax in the
    history row that the step's update zeroed, where eager TE's row is zero."""
    pending = evidence.get("first_pending_amaxes") or {}
    eager, thunder = (pending.get(side, {}).get("0", {}).get("input") for side in ("eager", "thunder"))
    return (
        not evidence["case_errors"]
        and "activation checkpointing" in evidence["variant"]
        and eager == 0.0 and thunder is not None and thunder != 0.0
    )


def _ranks_part_unreduced(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """No case raised and the ranks' thunder FP8 states differ: nothing reduced the amaxes across ranks."""
    return not evidence["case_errors"] and evidence.get("ranks_parted", 0) > 0


def _state_restarts_at_resume(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """The first difference is at the step where thunder's amax history (rank 0, first case and linear) starts over
    with one forward pass, a later step than 0, where eager TE's goes on growing."""
    thunder, eager = _forwards_by_step(evidence)
    first = evidence["first_difference"]
    restarts = [step for step in range(1, len(thunder)) if thunder[step] == 1 and (thunder[step - 1] or 0) >= 1]
    return (
        not evidence["case_errors"] and len(eager) == len(thunder) and len(restarts) == 1
        and first is not None and first[0] == restarts[0] and (eager[restarts[0]] or 0) > 1
    )


def _state_per_input_shape(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """One micro-batch a step, every case compiled in two or more cache entries, and from a step after 0 on, thunder's
    amax history at the first difference records fewer forward passes than eager TE's."""
    thunder, eager = _forwards_by_step(evidence)
    entries = [n for by_case in (evidence["cache_entries"] or {}).values() for n in by_case.values()]
    first = evidence["first_difference"]
    return (
        evidence["micro_batches"] == 1 and not evidence["case_errors"]
        and bool(entries) and all(n is not None and n >= 2 for n in entries)
        and first is not None and first[0] >= 1 and len(thunder) == len(eager) > first[0]
        and (thunder[first[0]] or 0) < (eager[first[0]] or 0)
    )


def _state_per_call(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """No case raised, and after step 0 thunder holds an FP8 state for a linear's later call (``name@2``:
    ``teparity.inrank.fp8state``) that eager TE does not."""
    return not evidence["case_errors"] and any("@" in name for name in _states_on_thunders_side_only(evidence))


def _state_stranded_by_te(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """No case raised; the first difference is a state or gradient (no output) at a step after 0, where each side's
    amax history holds one forward pass: both made a fresh state there."""
    thunder, eager = _forwards_by_step(evidence)
    first = evidence["first_difference"]
    return (
        not evidence["case_errors"] and first is not None and first[0] >= 1 and first[1] is None
        and len(thunder) == len(eager) > first[0] and thunder[first[0]] == eager[first[0]] == 1
    )


# -- the signatures -------------------------------------------------------------------------------

FP8_STATE_PER_CACHE_ENTRY = Signature(
    PartedFromEager,
    _fp8_state_per_cache_entry,
    "no case raised, thunder compiled two cache entries (the no-sync one and the synced one) on every rank, step 0's "
        "micro-batch 0 matches and the first difference is a later micro-batch of step 0, and thunder's "
        "step-0 amax history records fewer forward passes than eager TE's",
)
PARTED_FROM_STEP_ZERO_OF_MICRO_BATCHES = Signature(
    PartedFromEager,
    _parted_from_step_zero_of_micro_batches,
    "no case raised, each step runs several micro-batches, and the first difference is in step 0 (the gradients "
    "that the no-sync micro-batches accumulate)",
)
STATE_RESTARTS_EACH_STEP = Signature(
    PartedFromEager,
    _state_restarts_each_step,
    "no case raised; step 0 matches, the first difference is at step 1; thunder's amax history holds "
        "one forward pass at every step while eager TE's grows",
)
FP8_WHERE_OFF = Signature(
    PartedFromEager,
    _fp8_where_off,
    "no case raised; thunder's FP8 state shows FP8 where eager TE's shows none: after step 0 a linear with an FP8 "
        "state on thunder's side only, or at the first difference more forward passes in thunder's amax history",
)
BF16_COPIES_QUANTIZED = Signature(
    PartedFromEager,
    _bf16_copies_quantized,
    "no case raised; the first linear's step-0 input and weight amaxes on the thunder side are eager "
        "TE's rounded to bfloat16, at least one of them different from eager's",
)
RECOMPUTE_RECORDS_AMAX_AGAIN = Signature(
    PartedFromEager,
    _recompute_records_amax_again,
    "no case raised; under activation checkpointing, after step 0 thunder's first (recomputed) linear "
        "holds a non-zero input amax in row 0 of its history, the row TE's update zeroes, where eager TE's is zero",
)
RANKS_PART_UNREDUCED = Signature(
    PartedFromEager,
    _ranks_part_unreduced,
    "no case raised, and the ranks' thunder FP8 states differ from one another",
)
STATE_RESTARTS_AT_RESUME = Signature(
    PartedFromEager,
    _state_restarts_at_resume,
    "no case raised; the first difference is at the one step after 0 where thunder's amax history starts over with "
    "one forward pass while eager TE's goes on growing",
)
STATE_PER_INPUT_SHAPE = Signature(
    PartedFromEager,
    _state_per_input_shape,
    "no case raised, one micro-batch a step, thunder compiled two or more cache entries for every case, and the first "
    "difference is at a step after 0 whose thunder amax history records fewer forward passes than eager TE's",
)
STATE_PER_CALL = Signature(
    PartedFromEager,
    _state_per_call,
    "no case raised, and after step 0 thunder holds an FP8 state for a later call of a linear (name@2) that eager TE "
    "does not",
)
STATE_STRANDED_BY_TE = Signature(
    PartedFromEager,
    _state_stranded_by_te,
    "no case raised; the first difference is a state or gradient at a step after 0 where both sides' amax histories "
    "hold one forward pass (a fresh state each; eager TE's is not updated)",
)
