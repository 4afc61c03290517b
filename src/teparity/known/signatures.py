"""The signatures of the known upstream defects: each a failure type of ``teparity.judge.failures`` (or
``RanksFailed``), a predicate over that failure's evidence, and the predicate in words. A predicate reads only
the evidence its failure type carries; ``tests/harness/test_known_defects.py`` holds each against its defect's
own failure and against look-alikes that must not match."""

from __future__ import annotations

import re
from typing import Any

from teparity.judge.failures import (
    PartedFromEager,
    PartedFromEagerEvidence,
    RaisedOnTheRanks,
    RaisedOnTheRanksEvidence,
    ReducedOutsideTheGroup,
    ReducedOutsideTheGroupEvidence,
    SilentFallback,
    SilentFallbackEvidence,
    SyncCountWrong,
    ThunderRunRaised,
    TraceInvariantBroken,
    TraceInvariantBrokenEvidence,
)
from teparity.known.defect import Signature
from teparity.launch.outcome import RanksFailed
from teparity.records import NOTHING_STASHED
from teparity.stack.environment import Environment


def _legacy_module_lost_te(evidence: SilentFallbackEvidence, env: Environment) -> bool:
    """No linear held, and the legacy executor module's TE import names CPUOffloadEnabled: its checker declines
    every linear, for the legacy executor and for the functional one of the builds that borrow it."""
    failed = env.executors["legacy"].te_imports_failed or ""
    return evidence["claimed"] == 0 and "CPUOffloadEnabled" in failed


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


_NO_FP32_BIAS_ALGO = "Unable to find suitable cuBLAS GEMM algorithm"


def _fp32_bias_gemm(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    errors = evidence["case_errors"]
    return (
        evidence["numeric_differences"] == 0
        and bool(errors)
        and all(
            e["side"] == "thunder" and e["case"].dtype == "float32" and e["case"].bias and _NO_FP32_BIAS_ALGO in e["error"]
            for e in errors
        )
    )


def _group_ignored(evidence: ReducedOutsideTheGroupEvidence, env: Environment) -> bool:
    return evidence["thunder_equal_across_world"] and not env.executors[evidence["executor"]].honors_fp8_group


def _no_allreduce_behind_input_grad(evidence: RaisedOnTheRanksEvidence, env: Environment) -> bool:
    errors = evidence["errors"]
    return len(errors) == evidence["world_size"] and all(
        e["type"] == "builtins.ValueError"
        and "CollectionProxy" in e["message"] and "had an unexpected type" in e["message"]
        and {"optimize_allreduce_in_ddp_backward", "get_bsym_of_allreduce_of_grad"} <= set(e["functions"])
        for e in errors
    )


def _no_backward_sync_at_all(evidence: dict[str, Any], env: Environment) -> bool:
    """Every rank's backward trace has no sync and nothing else is broken, or no rank ran a sync at any step."""
    if "violations" in evidence:
        violations = evidence["violations"]
        return len(violations) == evidence.get("ranks") and all(
            v["invariant"] == "backward-sync-count" and "found 0 " in v["message"] for v in violations
        )
    return bool(evidence["counts"]) and all(not any(steps) for steps in evidence["counts"].values())


_UNPACK_AT_TE_LINEAR = re.compile(
    r"= te_linear_\d+\(.*\n(?:.*\n){0,3}?.*ValueError: (?:too many values to unpack \(expected \d+\)|"
    r"not enough values to unpack \(expected \d+, got \d+\))"
)


def _tracebacks_of_thunder(evidence: dict[str, Any]) -> list[str] | None:
    """The thunder side's tracebacks in any of the three shapes the failure takes, or None where a failure
    of another kind is among them (an eager case error, a rank that hung or died)."""
    if "case_errors" in evidence:  # PartedFromEager: cases that raised on a side, and no number that differs
        errors = evidence["case_errors"]
        only_thunder = errors and all(e["side"] == "thunder" for e in errors) and not evidence["numeric_differences"]
        return [e["error"] for e in errors] if only_thunder else None
    if "failures" in evidence:  # RanksFailed: ranks that raised outside a judge
        failures = evidence["failures"]
        return [f["detail"] for f in failures] if failures and all(f["kind"] == "raised" for f in failures) else None
    return [e["error"] for e in evidence.get("errors") or []] or None  # ThunderRunRaised


def _legacy_unpack_at_te_linear(evidence: dict[str, Any], env: Environment) -> bool:
    """Every thunder-side error is a ValueError unpacking a te_linear_N call's result (numbers differ by build)."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(_UNPACK_AT_TE_LINEAR.search(text) for text in tracebacks)


def _no_bucket_for_the_input_grad(evidence: dict[str, Any], env: Environment) -> bool:
    """Every rank raised thunder's 'Invalid index=0' in its FSDP bucketing: the transform check's ranks
    (``RaisedOnTheRanks``), or the fsdp tier's (``RanksFailed``, every failing rank raised it)."""
    if "failures" in evidence:
        failures = evidence["failures"]
        return bool(failures) and all(
            f["kind"] == "raised" and "RuntimeError: Invalid index=0, " in f["detail"]
            and "create_map_from_unsharded_grad_to_bucket" in f["detail"] for f in failures
        )
    errors = evidence["errors"]
    return len(errors) == evidence["world_size"] and all(
        e["type"] == "builtins.RuntimeError" and e["message"].startswith("Invalid index=0, ")
        and {"_apply_bucketing_to_backward_reduce_scatter", "create_map_from_unsharded_grad_to_bucket"} <= set(e["functions"])
        for e in errors
    )


def _no_grad_left_to_torch(evidence: SilentFallbackEvidence, env: Environment) -> bool:
    return evidence["claimed"] == 0 and not env.executors[evidence["executor"]].te_imports_failed


def _state_restarts_each_step(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    by_step = evidence["forwards_by_step"] or {}
    thunder, eager = by_step.get("thunder") or [], by_step.get("eager") or []
    first = evidence["first_difference"]
    return (
        not evidence["case_errors"]
        and len(thunder) > 1 and all(n == 1 for n in thunder)
        and len(eager) == len(thunder) and eager[-1] > 1
        and first is not None and first[0] == 1
    )


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


_NOTHING_RECOMPUTED = re.compile(r"\b0 forward TE linears recomputed \(at \[\]\)")


def _checkpointed_linears_not_recomputed(evidence: TraceInvariantBrokenEvidence, env: Environment) -> bool:
    violations = evidence["violations"]
    return bool(violations) and all(
        v["invariant"] == "recomputed-te-linears" and _NOTHING_RECOMPUTED.search(v["message"]) for v in violations
    )


#: A state named in a one-update-per-fp8-state violation, updated once in a forward trace and once in a backward one.
_STATE_UPDATED_IN_FORWARD_AND_BACKWARD = re.compile(
    r"'get_te_fp8_state_\d+': \['rank \d+ forward trace #\d+', 'rank \d+ backward trace #\d+'\]")


def _recompute_updates_the_forward_state_again(evidence: TraceInvariantBrokenEvidence, env: Environment) -> bool:
    violations = evidence["violations"]
    return bool(violations) and all(
        v["invariant"] == "one-update-per-fp8-state"
        and 0 < len(_STATE_UPDATED_IN_FORWARD_AND_BACKWARD.findall(v["message"])) == v["message"].count("'get_te_fp8_state_")
        for v in violations
    )


def _recompute_reads_an_unbound_forward_tensor(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    errors = evidence["case_errors"]
    return (
        "compiled with thunderfx" in evidence["variant"] and "activation checkpointing" in evidence["variant"]
        and not evidence["numeric_differences"] and bool(errors)
        and all(
            e["side"] == "thunder" and e["error"].startswith("UnboundLocalError: cannot access local variable")
            and "in backward_fn" in e["error"]
            for e in errors
        )
        and any("te_functional_linear_bwd(" in e["error"] for e in errors)
    )


def _gelu_reads_an_unbound_forward_input(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    errors = evidence["case_errors"]
    return (
        "activation checkpointing" in evidence["variant"] and "compiled with thunderfx" not in evidence["variant"]
        and not evidence["numeric_differences"] and bool(errors)
        and all(
            e["side"] == "thunder" and e["error"].startswith("UnboundLocalError: cannot access local variable")
            and "in backward_fn" in e["error"] and e["case"].activation == "gelu"
            for e in errors
        )
    )


def _no_sync_stashed_nothing(evidence: dict[str, Any], env: Environment) -> bool:
    """Every failing rank raised the harness's check that thunder's FSDP no-sync backward stashed a gradient, and
    nothing else failed."""
    failures = evidence.get("failures") or []
    return bool(failures) and all(f["kind"] == "raised" and f"AssertionError: {NOTHING_STASHED}" in f["detail"] for f in failures)


def _no_sync_stash_lost_a_producer(evidence: dict[str, Any], env: Environment) -> bool:
    """Every failing rank raised KeyError on a proxy name while thunder prepared the FSDP no-sync backward for execution
    (``transform_for_execution`` under ``split_forward_backward``), looking the proxy up in ``dce``'s producers or the
    trace interpreter's ``read``, and nothing else failed."""
    failures = evidence.get("failures") or []
    return bool(failures) and all(
        f["kind"] == "raised" and re.search(r"KeyError: 't\d+'", f["detail"]) is not None
        and (" in dce" in f["detail"] or " in read" in f["detail"]) and " in transform_for_execution" in f["detail"]
        and " in split_forward_backward" in f["detail"] for f in failures
    )


_FP8_RECIPE_ASSERTED = "assert fp8_recipe.mxfp8()"


def _checker_asserts_the_recipe(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Every case raised on the thunder side the AssertionError of the functional checker's ``check_valid_fp8_shapes``
    (a recipe neither delayed nor MXFP8), and no number differs."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(
        "AssertionError" in text and _FP8_RECIPE_ASSERTED in text and "check_valid_fp8_shapes" in text for text in tracebacks
    )


def _sdpa_params_of_six(evidence: dict[str, Any], env: Environment) -> bool:
    """Every thunder-side error is torch refusing thunder's ``_SDPAParams(...)`` call, and nothing else failed."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(
        "incompatible constructor arguments" in text and "_SDPAParams" in text for text in tracebacks
    )


def _torchcompile_cat_segfault(evidence: dict[str, Any], env: Environment) -> bool:
    """Every failing rank died of SIGSEGV in thunder's ``order_proxies``, under the ``torchcompile_cat`` fusion pass."""
    failures = evidence.get("failures") or []
    return bool(failures) and all(
        f["kind"] == "signaled" and "Fatal Python error: Segmentation fault" in f["detail"]
        and " in order_proxies" in f["detail"] and "torch_compile.py" in f["detail"] and " in fusion_pass" in f["detail"]
        for f in failures
    )


#: What thunder.jit raises, by build, while it traces a ``torch.utils.checkpoint`` region it cannot follow.
_CHECKPOINT_NOT_TRACED = (
    "SequenceWrapperMethods.__getitem__() missing 1 required positional argument: 'idx'",
    "requires_grad=True is not yet supported within thunder.jit",
    "must be Tensor, not TensorProxy",
)


def _checkpoint_not_traced(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Under activation checkpointing, every case raised on the thunder side while tracing the checkpointed region,
    and no number differs."""
    errors = evidence["case_errors"]
    return (
        "activation checkpointing" in evidence["variant"] and not evidence["numeric_differences"] and bool(errors)
        and all(e["side"] == "thunder" and any(said in e["error"] for said in _CHECKPOINT_NOT_TRACED) for e in errors)
    )


def _state_restarts_at_resume(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """The first difference is at the step where thunder's amax history (rank 0, first case and linear) starts over
    with one forward pass, a later step than 0, where eager TE's goes on growing."""
    by_step = evidence["forwards_by_step"] or {}
    thunder, eager = by_step.get("thunder") or [], by_step.get("eager") or []
    first = evidence["first_difference"]
    restarts = [step for step in range(1, len(thunder)) if thunder[step] == 1 and (thunder[step - 1] or 0) >= 1]
    return (
        not evidence["case_errors"] and len(eager) == len(thunder) and len(restarts) == 1
        and first is not None and first[0] == restarts[0] and (eager[restarts[0]] or 0) > 1
    )


def _state_per_input_shape(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """One micro-batch a step, every case compiled in two or more cache entries, and from a step after 0 on, thunder's
    amax history at the first difference records fewer forward passes than eager TE's."""
    by_step = evidence["forwards_by_step"] or {}
    thunder, eager = by_step.get("thunder") or [], by_step.get("eager") or []
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
    amaxes = evidence["first_amaxes"] or {}
    thunder, eager = set(amaxes.get("thunder") or ()), set(amaxes.get("eager") or ())
    return not evidence["case_errors"] and any("@" in name for name in thunder - eager)


_BLOCK_SCALING_QUANTIZERS = "assert self.num_quantizers % 3 == 0"


def _block_scaling_quantizer_count(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Every case raised on the thunder side TE's AssertionError of Float8BlockScaling's ``make_quantizers`` (a
    recipe state of a number of quantizers not a multiple of 3), and no number differs."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(
        "AssertionError" in text and _BLOCK_SCALING_QUANTIZERS in text and "make_quantizers" in text for text in tracebacks
    )


def _symbolic_values_cannot_unpack(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Every case raised on the thunder side thunder's NotImplementedError unpacking an object from a provenance
    record (under ``cache="symbolic values"``), and no number differs."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return "symbolic values" in evidence["variant"] and bool(tracebacks) and all(
        "NotImplementedError" in text and _UNPACKING_FROM_PROVENANCE in text for text in tracebacks
    )


_UNPACKING_FROM_PROVENANCE = "Exception occured unpacking object from ProvenanceRecord"

# -- the signatures -------------------------------------------------------------------------------

LEGACY_MODULE_LOST_TE = Signature(
    SilentFallback,
    _legacy_module_lost_te,
    "no linear is held by TE and the executor module's own TE import error names CPUOffloadEnabled",
)
LEGACY_CHECKER_LOST_TE = Signature(
    SilentFallback,
    _legacy_module_lost_te,
    "no linear is held by TE and the legacy executor module's own TE import error names CPUOffloadEnabled",
)
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
FP32_BIAS_GEMM = Signature(
    PartedFromEager,
    _fp32_bias_gemm,
    f"every difference is a thunder-side case with fp32 parameters and a bias raising '{_NO_FP32_BIAS_ALGO}'",
    bounded=True,
)
AUTOCAST_WITHOUT_GROUP = Signature(
    ReducedOutsideTheGroup,
    _group_ignored,
    "thunder's FP8 state is identical on every rank (reduced over the world) where eager TE's "
        "differs between fp8 groups, and the executor's autocast wrapper names no fp8_group",
)
UPDATE_WITHOUT_GROUP = Signature(
    ReducedOutsideTheGroup,
    _group_ignored,
    "thunder's FP8 state is identical on every rank (reduced over the world) where eager TE's "
        "differs between fp8 groups, and the executor's update does not ask TE for the group",
)
NO_ALLREDUCE_BEHIND_INPUT_GRAD = Signature(
    RaisedOnTheRanks,
    _no_allreduce_behind_input_grad,
    "every rank raised ValueError '<CollectionProxy(...)> had an unexpected type' from "
        "get_bsym_of_allreduce_of_grad, called by optimize_allreduce_in_ddp_backward",
    bounded=True,
)
LEGACY_UNPACK_AT_TE_LINEAR = Signature(
    (PartedFromEager, RanksFailed, ThunderRunRaised),
    _legacy_unpack_at_te_linear,
    "every thunder-side error (a case's, a rank's, or the run's) is a ValueError 'too many values to "
        "unpack' or 'not enough values to unpack' at a te_linear_N call of the computation trace, and nothing "
        "else failed",
    bounded=True,
)
NO_BUCKET_FOR_THE_INPUT_GRAD = Signature(
    (RaisedOnTheRanks, RanksFailed),
    _no_bucket_for_the_input_grad,
    "every rank raised RuntimeError 'Invalid index=0, ...' from create_map_from_unsharded_grad_to_bucket, "
        "called by _apply_bucketing_to_backward_reduce_scatter",
    bounded=True,
)
NO_BACKWARD_SYNC_AT_ALL = Signature(
    (TraceInvariantBroken, SyncCountWrong),
    _no_backward_sync_at_all,
    "every rank's backward trace breaks backward-sync-count with none found, and nothing else, "
        "or every rank ran no backward sync at any step",
    bounded=True,
)
CURRENT_SCALING_LEFT_TO_TORCH = Signature(
    SilentFallback,
    _no_grad_left_to_torch,
    "no linear is held by TE, and the executor's TE imports did not fail",
)
NO_GRAD_LEFT_TO_TORCH = Signature(
    SilentFallback,
    _no_grad_left_to_torch,
    "no linear is held by TE, and the executor's TE imports did not fail",
)
STATE_RESTARTS_EACH_STEP = Signature(
    PartedFromEager,
    _state_restarts_each_step,
    "no case raised; step 0 matches, the first difference is at step 1; thunder's amax history holds "
        "one forward pass at every step while eager TE's grows",
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
CHECKPOINTED_LINEARS_NOT_RECOMPUTED = Signature(
    TraceInvariantBroken,
    _checkpointed_linears_not_recomputed,
    "the only broken trace invariant is recomputed-te-linears, with no forward TE linear recomputed in "
        "the backward trace",
)
RECOMPUTE_READS_AN_UNBOUND_FORWARD_TENSOR = Signature(
    PartedFromEager,
    _recompute_reads_an_unbound_forward_tensor,
    "under activation checkpointing compiled with thunderfx, every case error is the thunder side's "
        "UnboundLocalError in backward_fn, at least one of them at a te_functional_linear_bwd call, and no number differs",
    bounded=True,
)
CHECKPOINTED_GELU_READS_AN_UNBOUND_INPUT = Signature(
    PartedFromEager,
    _gelu_reads_an_unbound_forward_input,
    "under activation checkpointing compiled with thunder.jit, every case error is the thunder side's "
        "UnboundLocalError in backward_fn, each in a case with GELUs, and no number differs",
    bounded=True,
)
RECOMPUTE_UPDATES_THE_FORWARD_STATE_AGAIN = Signature(
    TraceInvariantBroken,
    _recompute_updates_the_forward_state_again,
    "every broken trace invariant is one-update-per-fp8-state, each state it names updated once in a "
        "forward trace and once in a backward trace",
)
FSDP_NO_SYNC_STASHED_NOTHING = Signature(
    RanksFailed,
    _no_sync_stashed_nothing,
    "every failing rank raised AssertionError 'thunder's FSDP no-sync backward stashed no unsharded gradient' (the "
    "harness's check before no_sync reduces), and nothing else failed",
    bounded=True,
)
FSDP_NO_SYNC_STASH_LOST_A_PRODUCER = Signature(
    RanksFailed,
    _no_sync_stash_lost_a_producer,
    "every failing rank raised KeyError on a proxy name ('t43') in thunder's dce or its trace interpreter's read, under "
    "transform_for_execution in split_forward_backward, and nothing else failed",
    bounded=True,
)
CHECKER_ASSERTS_THE_RECIPE = Signature(
    PartedFromEager,
    _checker_asserts_the_recipe,
    f"every case raised on the thunder side AssertionError '{_FP8_RECIPE_ASSERTED}' in the functional checker's "
    "check_valid_fp8_shapes, and no number differs",
    bounded=True,
)
SDPA_PARAMS_OF_SIX = Signature(
    (PartedFromEager, RanksFailed, ThunderRunRaised),
    _sdpa_params_of_six,
    "every thunder-side error (a case's, a rank's, or the run's) is TypeError 'incompatible constructor arguments' "
    "for torch._C._SDPAParams, and nothing else failed",
    bounded=True,
)
TORCHCOMPILE_CAT_SEGFAULT = Signature(
    RanksFailed,
    _torchcompile_cat_segfault,
    "every failing rank was killed by SIGSEGV with its stack in thunder's order_proxies (core/transform_common.py) "
    "under the torchcompile_cat executor's fusion_pass (executors/torch_compile.py)",
    bounded=True,
)
CHECKPOINT_NOT_TRACED = Signature(
    PartedFromEager,
    _checkpoint_not_traced,
    "under activation checkpointing every case raised on the thunder side, each with one of thunder.jit's errors on "
    "a checkpointed region (the interpreter's SequenceWrapperMethods 'idx', requires_grad=True not supported, a "
    "TensorProxy passed to linear), and no number differs",
    bounded=True,
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
BLOCK_SCALING_QUANTIZER_COUNT = Signature(
    PartedFromEager,
    _block_scaling_quantizer_count,
    f"every case raised on the thunder side TE's AssertionError '{_BLOCK_SCALING_QUANTIZERS}' in make_quantizers, and "
    "no number differs",
    bounded=True,
)
SYMBOLIC_VALUES_CANNOT_UNPACK = Signature(
    PartedFromEager,
    _symbolic_values_cannot_unpack,
    f"under cache='symbolic values' every case raised on the thunder side NotImplementedError '{_UNPACKING_FROM_PROVENANCE}', "
    "and no number differs",
    bounded=True,
)
