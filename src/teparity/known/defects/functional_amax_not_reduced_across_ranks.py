"""Known upstream defect ``functional-amax-not-reduced-across-ranks``: before thunder 0.2.5.dev20250824 the functional
TE executor does not all-reduce amaxes across data-parallel ranks: each rank's FP8 scales follow its own data."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import BisectedBound, KnownDefect

ENTRY = KnownDefect(
    id="functional-amax-not-reduced-across-ranks",
    summary="before thunder 0.2.5.dev20250824 the functional TE executor does not all-reduce amaxes across data-parallel "
    "ranks: each rank's FP8 scales follow its own data",
    executors=("functional",),
    signature=signatures.RANKS_PART_UNREDUCED,
    checks=(checks.DDP, checks.DDP_FIRST_STEP, checks.DDP_FP8_SWITCHED, checks.DDP_LLAMA, checks.DDP_GRAD_ACCUMULATION, checks.DDP_LLAMA_GRAD_ACCUMULATION,
            checks.FSDP, checks.FSDP_LLAMA, checks.FSDP_GRAD_ACCUMULATION, checks.DDP_THUNDERFX, checks.FSDP2_THUNDERFX,
            checks.FSDP_ACTIVATION_CHECKPOINTING),
    thunder=">=0.2.3,<=0.2.5.dev20250817",
    te=">=2.9",
    cause="transformer_engine_v2ex_impl.py (0.2.3, 0.2.4) updates each recipe state from its own amax history, where eager "
    "TE reduces over the fp8_autocast group; thunder PR #2404 added the all-reduce (teparity's mutant "
    "functional-no-cross-rank-reduction removes it). Run on 0.2.3 .. 0.2.5.dev20250817 with TE 2.9.0; a GPU bisect finds "
    "0.2.5.dev20250824 clean, where functional-fp8-group-ignored starts. Every multi-rank FP8 check meets it: the ddp and "
    "fsdp tiers' on 0.2.3 and 0.2.4 with TE 2.9.0 (docs/results/h200-matrix-4a18837), torch DDP around thunderfx's too "
    "(docs/results/h200-te2.9.0-8cf5409-strategies)",
    model=models.NO_REDUCTION,
    seen=("docs/results/h200-te2.9.0-2bafd7a", "docs/results/h200-te2.9.0-82bfe86-features", "docs/results/h200-te2.9.0-363ddd5",
          "docs/results/h200-te2.9.0-b98ccf1-bisects", "docs/results/h200-te2.9.0-04f6fc3", "docs/results/h200-matrix-4a18837", "docs/results/h200-te2.9.0-8cf5409-strategies"),
    bounds=(BisectedBound("thunder", "<=0.2.5.dev20250817", "docs/results/h200-te2.9.0-04f6fc3-bisects/unreduced-fix/bisect.json"),),
)
