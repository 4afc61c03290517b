"""The known defects under activation checkpointing (``torch.utils.checkpoint``): the legacy executor's
recomputation records amaxes twice; under the functional executor the region saves its TE linears, its backward reads
forward tensors it never computes, or it updates a forward FP8 state again; thunder.jit before 2025 cannot trace the
region."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import BisectedBound, KnownDefect
from teparity.known.runs import (
    CLEAN_RELEASES_RUN_TE29,
    ENTRY_BISECTS_TE29,
    FEATURES_RUN_TE29,
    FEATURES_RUN_TE29_82BFE86,
    FIX_BISECTS_TE29,
    MATRIX,
    RELEASES_RUN_TE29,
    RELEASES_WEEKLIES_RUN_TE29,
    SEEN_TE29,
    STRATEGIES_RUN_TE29,
    TE18_RUN,
    VERSIONS_RUN_TE29,
    WEEKLIES_RUN_TE29,
)

LEGACY_CHECKPOINTING_RECORDS_AMAX_TWICE = KnownDefect(
    id="legacy-checkpointing-records-amax-twice",
    summary="with the legacy TE executor, a linear under activation checkpointing records its amaxes again when "
    "the backward recomputes it, after the step's update: its FP8 state and gradients part from eager TE's",
    executors=("legacy",),
    signature=signatures.RECOMPUTE_RECORDS_AMAX_AGAIN,
    checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
    thunder=">=0.2.4,<0.2.7",
    te=">=2.9,<2.10",
    cause="seen, not read in source: the legacy te_linear_N (a TELinear, transformer_engine_v1ex.py) records amaxes in its "
    "fp8_meta; thunder's checkpointing reruns it in the backward after the step's amax update, refilling the cleared slot: "
    "gradients part from step 0 (the functional executor's own transform avoids it). Under thunder fsdp the refilled slot "
    "is each rank's own amax, reduced by no one until the next forward: the ranks' pending rows part. Run on 0.2.4 .. 0.2.6 "
    "with TE 2.9.0; a GPU bisect found 0.2.3 .. 0.2.4.dev20250622 raising legacy-executor-miscounts-te-2.9-saved-tensors first",
    model=models.RECOMPUTE_RECORDS_AMAXES,
    seen=(FEATURES_RUN_TE29, FEATURES_RUN_TE29_82BFE86, VERSIONS_RUN_TE29,
          f"{ENTRY_BISECTS_TE29}/ckpt-twice-from", STRATEGIES_RUN_TE29),
)

FUNCTIONAL_CHECKPOINTING_SAVES_TE_LINEARS = KnownDefect(
    id="functional-checkpointing-saves-te-linears",
    summary="up to thunder 0.2.5.dev20250629 thunder.jit under activation checkpointing recomputes none of the functional "
    "executor's TE linears: the checkpointed region keeps its activations",
    executors=("functional",),
    signature=signatures.CHECKPOINTED_LINEARS_NOT_RECOMPUTED,
    checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
    thunder=">=0.2.3,<=0.2.5.dev20250629",
    te=SEEN_TE29,
    cause="seen, not read in source: on 0.2.3 .. 0.2.5.dev20250629 (TE 2.9.0) a checkpointed region's backward has no "
    "te_functional_linear_fwd: its TE linears are saved. dev20250706 .. dev20250803 show "
    "functional-checkpointing-updates-fp8-state-twice; dev20250810 ships the fix "
    "(docs/results/wheels-functional-checkpointing-transform). The fix bisect was cut off, hidden by that defect "
    "(docs/results/h200-te2.9.0-04f6fc3-bisects/ckpt-saves-fix); dev20250629 was a near miss in "
    "docs/results/h200-te2.9.0-04f6fc3-bisects/twice-from. Under thunder fsdp the same (0.2.3, 0.2.4)",
    model=models.SAVED_NOT_RECOMPUTED,
    seen=(VERSIONS_RUN_TE29, FEATURES_RUN_TE29_82BFE86, CLEAN_RELEASES_RUN_TE29, STRATEGIES_RUN_TE29),
)

FUNCTIONAL_THUNDERFX_CHECKPOINTING_BACKWARD_UNBOUND = KnownDefect(
    id="functional-thunderfx-checkpointing-backward-unbound",
    summary="up to thunder 0.2.5.dev20250629 a checkpointed region compiled with thunderfx fails in its backward: the "
    "backward reads a forward tensor (a TE linear's output, an activation's input) that it never computes",
    executors=("functional",),
    signature=signatures.RECOMPUTE_READS_AN_UNBOUND_FORWARD_TENSOR,
    checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
    thunder=">=0.2.3,<=0.2.5.dev20250629",
    te=SEEN_TE29,
    cause="seen, not read in source: thunder.backward_fn passes te_functional_linear_bwd a forward tensor (t29 on 0.2.3) "
    "that the backward never defines, or, with a GELU between linears, an unrecomputed activation input; no checkpointing "
    "transform before dev20250810 (docs/results/wheels-functional-checkpointing-transform). The fix bisect was cut off "
    "(docs/results/h200-te2.9.0-04f6fc3-bisects/thunderfx-fix): dev20250810 clean, dev20250706 .. dev20250803 hidden by "
    "functional-checkpointing-updates-fp8-state-twice; 0.2.5.dev20250629 near-missed (docs/results/h200-te2.9.0-db1ecfc), "
    "ending the range. Under torch FSDP2 the same error, on gloo ranks sharing a GPU before FSDP2's crash there (0.2.3, 0.2.4)",
    seen=(VERSIONS_RUN_TE29, FEATURES_RUN_TE29_82BFE86, RELEASES_RUN_TE29,
          CLEAN_RELEASES_RUN_TE29, WEEKLIES_RUN_TE29, STRATEGIES_RUN_TE29),
)

FUNCTIONAL_JIT_CHECKPOINTING_BACKWARD_UNBOUND = KnownDefect(
    id="functional-jit-checkpointing-backward-unbound",
    summary="up to thunder 0.2.5.dev20250629, thunder.jit under activation checkpointing fails in the backward of a "
    "checkpointed region with a GELU after a functional-executor TE linear: the GELU's backward reads its forward "
    "input, the TE linear's output, which the backward neither receives nor recomputes",
    executors=("functional",),
    signature=signatures.CHECKPOINTED_GELU_READS_AN_UNBOUND_INPUT,
    checks=(checks.ACTIVATION_CHECKPOINTING,),
    thunder=">=0.2.3,<=0.2.5.dev20250629",
    te=SEEN_TE29,
    cause="seen, not read in source: on 0.2.3 and 0.2.4 (TE 2.9.0) the backward of the case with GELUs raises "
    "UnboundLocalError on `torch.mul(t74, ...)`, t74 (f32[2, 8, 32]) the second TE linear's output, while the "
    "linears-only case trains and matches eager TE with its TE linears saved (docs/results/h200-matrix-4a18837): the consequence of "
    "functional-checkpointing-saves-te-linears wherever the region recomputes a GELU, so its range is that entry's. "
    "thunderfx fails earlier, at te_functional_linear_bwd (functional-thunderfx-checkpointing-backward-unbound)",
    seen=(MATRIX,),
)

FUNCTIONAL_CHECKPOINTING_UPDATES_FP8_STATE_TWICE = KnownDefect(
    id="functional-checkpointing-updates-fp8-state-twice",
    summary="on the weekly builds 0.2.5.dev20250706 .. 0.2.5.dev20250803, under activation checkpointing, the backward's recomputation "
    "updates a forward FP8 state the forward already updated that step",
    executors=("functional",),
    signature=signatures.RECOMPUTE_UPDATES_THE_FORWARD_STATE_AGAIN,
    checks=(checks.ACTIVATION_CHECKPOINTING,),
    thunder=">=0.2.5.dev20250706,<=0.2.5.dev20250803",
    te=SEEN_TE29,
    cause="seen, not read in source: a checkpointed region's backward runs te_fp8_amax_and_scale_update on states the "
    "forward updated that step; thunder.jit and thunderfx, both recipes. _te_activation_checkpointing_transform fixes it in "
    "0.2.5.dev20250810 (docs/results/wheels-functional-checkpointing-transform; GPU bisect clean). First bad: "
    "0.2.5.dev20250706 (TE 2.9.0, docs/results/h200-te2.9.0-04f6fc3-bisects/twice-from); dev20250629 recomputes no TE "
    "linear (functional-checkpointing-saves-te-linears), so that log has no boundary",
    seen=(RELEASES_WEEKLIES_RUN_TE29, FIX_BISECTS_TE29, CLEAN_RELEASES_RUN_TE29),
    bounds=(BisectedBound("thunder", "<=0.2.5.dev20250803", f"{FIX_BISECTS_TE29}/twice-last.json"),),
)

THUNDER_JIT_CANNOT_TRACE_CHECKPOINT_BEFORE_2025 = KnownDefect(
    id="thunder-jit-cannot-trace-checkpoint-before-2025",
    summary="thunder.jit before 0.2.0.dev20250112 cannot trace a torch.utils.checkpoint region: the thunder side "
    "raises while tracing",
    executors=("legacy", "functional"),
    signature=signatures.CHECKPOINT_NOT_TRACED,
    checks=(checks.ACTIVATION_CHECKPOINTING,),
    thunder=">=0.2.0.dev20240728,<0.2.0.dev20250112",
    te=">=1.6",
    without_te=True,  # a defect of thunder.jit alone: its reproduction runs on the CPU
    cause="thunder interprets torch's non-reentrant checkpoint: torch 2.11's tree_flatten annotation defeats it (the 'idx' "
    "error), torch 2.4-2.5's torch.empty(..., requires_grad=True) is unsupported; dev20241020 .. dev20250105 call the "
    "region uninterpreted via a lookaside (a TensorProxy reaches linear); dev20250112 matches eager. Run on the CPU without "
    "TE, dev20240728 .. dev20250112, dev20241027 .. dev20241124 read only "
    "(docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd), and with TE 1.8.0 on dev20240728, dev20240901",
    seen=(TE18_RUN,),
)
