"""Known upstream defect ``functional-checkpointing-saves-te-linears``: up to thunder 0.2.5.dev20250629 thunder.jit
under activation checkpointing recomputes none of the functional executor's TE linears: the checkpointed region
keeps its activations."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="functional-checkpointing-saves-te-linears",
    summary="up to thunder 0.2.5.dev20250629 thunder.jit under activation checkpointing recomputes none of the functional "
    "executor's TE linears: the checkpointed region keeps its activations",
    executors=("functional",),
    signature=signatures.CHECKPOINTED_LINEARS_NOT_RECOMPUTED,
    checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
    thunder=">=0.2.3,<=0.2.5.dev20250629",
    te=">=2.9",
    cause="seen, not read in source: on 0.2.3 .. 0.2.5.dev20250629 (TE 2.9.0) a checkpointed region's backward has no "
    "te_functional_linear_fwd: its TE linears are saved. dev20250706 .. dev20250803 show "
    "functional-checkpointing-updates-fp8-state-twice; dev20250810 ships the fix "
    "(docs/results/wheels-functional-checkpointing-transform). The fix bisect was cut off, hidden by that defect "
    "(docs/results/h200-te2.9.0-04f6fc3-bisects/ckpt-saves-fix); dev20250629 was a near miss in "
    "docs/results/h200-te2.9.0-04f6fc3-bisects/twice-from. Under thunder fsdp the same (0.2.3, 0.2.4)",
    model=models.SAVED_NOT_RECOMPUTED,
    seen=("docs/results/h200-te2.9.0-2bafd7a", "docs/results/h200-te2.9.0-82bfe86-features", "docs/results/h200-te2.9.0-04f6fc3", "docs/results/h200-te2.9.0-8cf5409-strategies"),
    fixed=(FixSeen("thunder", "<=0.2.5.dev20250629", "docs/results/h200-te2.9.0-db1ecfc/th-0.2.5.dev20250706.json.gz"),),
)
