"""Known upstream defect ``functional-runs-fp8-where-autocast-disabled``: thunder's functional TE executor runs its
linears in FP8 where the caller turned FP8 off, around the program or inside it, and updates their FP8 state as with
FP8 on."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="functional-runs-fp8-where-autocast-disabled",
    summary="thunder's functional TE executor runs its linears in FP8 where the caller turned FP8 off "
    "(te.autocast(enabled=False) around the compiled program, or around some of its layers inside it), and updates "
    "their FP8 state as with FP8 on",
    executors=("functional",),
    signature=signatures.FP8_WHERE_OFF,
    checks=("fp8-switched[off]", "fp8-switched[warm-up]", "fp8-switched[evaluation-between]", checks.DDP_FP8_SWITCHED,
            checks.FP8_OFF_ENDS),
    thunder=">=0.2.3",
    te=">=2.9",
    cause="thunder/executors/transformer_engineex_impl.py (transformer_engine_v2ex_impl.py in 0.2.3-0.2.5): TERecipe.__call__ "
    "takes FP8GlobalStateManager.get_fp8_recipe() and nothing reads is_fp8_enabled(), so every linear it claimed "
    "quantizes whatever autocast the caller is in; a te.autocast(enabled=False) inside the traced forward leaves no "
    "trace at all",
    model=models.FP8_ON_WHERE_OFF,
    seen=(
        "docs/results/h100-te2.9.0-te2.20.2-b1f1fda-switching-rows",
        "docs/results/h100-te2.9.0-85c5bb3-switching-models",
        "docs/results/h100-te2.20.2-te2.12.0-5c9f6f5",
    ),
)
