"""Known upstream defect ``te-recipe-type-change-strands-delayed-state``: eager TE, whose reference the gate is, never
updates a module's delayed-scaling state again after its recipe type changed and changed back; thunder's functional
executor makes a fresh state there too, and updates it."""

from __future__ import annotations

from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="te-recipe-type-change-strands-delayed-state",
    summary="eager TE (the reference) strands a module's delayed-scaling state after a recipe type change and back "
    "(DelayedScaling, Float8CurrentScaling, DelayedScaling): the new state's amax history and scale are never updated "
    "(scale 1 from then on); thunder's functional executor makes a fresh state at the change too, and updates it",
    executors=("functional",),
    signature=signatures.STATE_STRANDED_BY_TE,
    checks=("recipe-change[type]",),
    thunder=">=0.2.3",
    te=">=2.9",
    cause="transformer_engine/pytorch/module/base.py set_meta_tensor makes a new DelayedScalingRecipeState when the "
    "module's state is of another recipe type; quantization.py FP8GlobalStateManager.add_fp8_tensors_to_global_buffer "
    "returns where fp8_meta already holds its buffer index (set at the module's first delayed-scaling forward), so the "
    "global amax buffer, which the autocast exit and the backward update, keeps the first state's tensors and never "
    "holds the new one's. Unchanged on TE's main branch (2026-08)",
    model=models.STATE_REJOINS_UPDATE_AFTER_TYPE_CHANGE,
    seen=(
        "docs/results/h100-te2-7cd3218-new-rows",
        "docs/results/h100-te2.9.0-4bf1ef8-new-rows-bench",
        "docs/results/h100-te2.9.0-85c5bb3-switching-models",
        "docs/results/h100-te2.9.0-te2.20.2-b1f1fda-switching-rows",
    ),
)
