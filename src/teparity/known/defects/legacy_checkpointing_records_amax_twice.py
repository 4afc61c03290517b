"""Known upstream defect ``legacy-checkpointing-records-amax-twice``: with the legacy TE executor, a linear under
activation checkpointing records its amaxes again when the backward recomputes it, after the step's update: its FP8
state and gradients part from eager TE's."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="legacy-checkpointing-records-amax-twice",
    summary="with the legacy TE executor, a linear under activation checkpointing records its amaxes again when "
    "the backward recomputes it, after the step's update: its FP8 state and gradients part from eager TE's",
    executors=("legacy",),
    signature=signatures.RECOMPUTE_RECORDS_AMAX_AGAIN,
    checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
    thunder=">=0.2.4,<0.2.7",
    te=">=2.9",
    cause="seen, not read in source: the legacy te_linear_N (a TELinear, transformer_engine_v1ex.py) records amaxes in its "
    "fp8_meta; thunder's checkpointing reruns it in the backward after the step's amax update, refilling the cleared slot: "
    "gradients part from step 0 (the functional executor's own transform avoids it). Under thunder fsdp the refilled slot "
    "is each rank's own amax, reduced by no one until the next forward: the ranks' pending rows part. Run on 0.2.4 .. 0.2.6 "
    "with TE 2.9.0; a GPU bisect found 0.2.3 .. 0.2.4.dev20250622 raising legacy-executor-miscounts-te-2.9-saved-tensors first",
    model=models.RECOMPUTE_RECORDS_AMAXES,
    seen=("docs/results/h200-te2.9.0-65ae0b1-features", "docs/results/h200-te2.9.0-82bfe86-features", "docs/results/h200-te2.9.0-2bafd7a",
          "docs/results/h200-te2.9.0-363ddd5-bisects/ckpt-twice-from", "docs/results/h200-te2.9.0-8cf5409-strategies"),
    fixed=(FixSeen("thunder", "<0.2.7", "docs/results/h100-matrix-a42f2cc/te-2.9.0/te2.9.0-th0.2.7.dev20251130.json.gz"),),
)
