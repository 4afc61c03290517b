"""Known upstream defect ``functional-jit-checkpointing-backward-unbound``: up to thunder 0.2.5.dev20250629,
thunder.jit under activation checkpointing fails in the backward of a checkpointed region with a GELU after a
functional-executor TE linear: the GELU's backward reads its forward input, the TE linear's output, which the
backward neither receives nor recomputes."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="functional-jit-checkpointing-backward-unbound",
    summary="up to thunder 0.2.5.dev20250629, thunder.jit under activation checkpointing fails in the backward of a "
    "checkpointed region with a GELU after a functional-executor TE linear: the GELU's backward reads its forward "
    "input, the TE linear's output, which the backward neither receives nor recomputes",
    executors=("functional",),
    signature=signatures.CHECKPOINTED_GELU_READS_AN_UNBOUND_INPUT,
    checks=(checks.ACTIVATION_CHECKPOINTING,),
    thunder=">=0.2.3,<=0.2.5.dev20250629",
    te=">=2.9",
    cause="seen, not read in source: on 0.2.3 and 0.2.4 (TE 2.9.0) the backward of the case with GELUs raises "
    "UnboundLocalError on `torch.mul(t74, ...)`, t74 (f32[2, 8, 32]) the second TE linear's output, while the "
    "linears-only case trains and matches eager TE with its TE linears saved (docs/results/h200-matrix-4a18837): the consequence of "
    "functional-checkpointing-saves-te-linears wherever the region recomputes a GELU, so its range is that entry's. "
    "thunderfx fails earlier, at te_functional_linear_bwd (functional-thunderfx-checkpointing-backward-unbound)",
    seen=("docs/results/h200-matrix-4a18837",),
    fixed=(FixSeen("thunder", "<=0.2.5.dev20250629", "docs/results/h200-te2.9.0-db1ecfc/th-0.2.5.dev20250706.json.gz"),),
)
