"""Known upstream defect ``functional-thunderfx-checkpointing-backward-unbound``: up to thunder 0.2.5.dev20250629 a
checkpointed region compiled with thunderfx fails in its backward: the backward reads a forward tensor (a TE
linear's output, an activation's input) that it never computes."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="functional-thunderfx-checkpointing-backward-unbound",
    summary="up to thunder 0.2.5.dev20250629 a checkpointed region compiled with thunderfx fails in its backward: the "
    "backward reads a forward tensor (a TE linear's output, an activation's input) that it never computes",
    executors=("functional",),
    signature=signatures.RECOMPUTE_READS_AN_UNBOUND_FORWARD_TENSOR,
    checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
    thunder=">=0.2.3,<=0.2.5.dev20250629",
    te=">=2.9",
    cause="seen, not read in source: thunder.backward_fn passes te_functional_linear_bwd a forward tensor (t29 on 0.2.3) "
    "that the backward never defines, or, with a GELU between linears, an unrecomputed activation input; no checkpointing "
    "transform before dev20250810 (docs/results/wheels-functional-checkpointing-transform). The fix bisect was cut off "
    "(docs/results/h200-te2.9.0-04f6fc3-bisects/thunderfx-fix): dev20250810 clean, dev20250706 .. dev20250803 hidden by "
    "functional-checkpointing-updates-fp8-state-twice; 0.2.5.dev20250629 near-missed (docs/results/h200-te2.9.0-db1ecfc), "
    "ending the range. Under torch FSDP2 the same error, on gloo ranks sharing a GPU before FSDP2's crash there (0.2.3, 0.2.4)",
    seen=("docs/results/h200-te2.9.0-2bafd7a", "docs/results/h200-te2.9.0-82bfe86-features", "docs/results/h200-te2.9.0-28d36b3",
          "docs/results/h200-te2.9.0-04f6fc3", "docs/results/h200-te2.9.0-db1ecfc", "docs/results/h200-te2.9.0-8cf5409-strategies"),
    fixed=(FixSeen("thunder", "<=0.2.5.dev20250629", "docs/results/h200-te2.9.0-db1ecfc/th-0.2.5.dev20250706.json.gz"),),
)
