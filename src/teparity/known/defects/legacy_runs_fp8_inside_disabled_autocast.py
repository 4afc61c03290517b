"""Known upstream defect ``legacy-runs-fp8-inside-disabled-autocast``: thunder's legacy TE executor wraps its program in
an FP8 autocast of its own, which runs the linears in FP8 inside the caller's disabled one (no forward state update at
its exit), and a disabled autocast inside the forward leaves no trace."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="legacy-runs-fp8-inside-disabled-autocast",
    summary="thunder's legacy TE executor runs its linears in FP8 where the caller turned FP8 off: its own fp8_autocast "
    "nests inside the caller's te.autocast(enabled=False), whose exit then updates no forward FP8 state, and a disabled "
    "autocast around layers inside the forward leaves no trace",
    executors=("legacy",),
    signature=signatures.FP8_WHERE_OFF,
    checks=("fp8-switched[off]", "fp8-switched[warm-up]", "fp8-switched[evaluation-between]", checks.DDP_FP8_SWITCHED,
            checks.FP8_OFF_ENDS),
    thunder=">=0.2.4",
    te=">=2.9",
    cause="thunder/executors/transformer_engineex.py (transformer_engine_v1ex.py from 0.2.5): the forward program runs "
    "under fp8_autocast(fp8_recipe=...) with enabled=True whatever the caller's state; nested in a disabled autocast, "
    "TE's exit updates the forward state only at depth 0 of an enabled autocast. Runs on 0.2.4 .. 0.2.6 with TE 2.9.0 "
    "(0.2.2 and 0.2.3 are held by legacy-executor-miscounts-te-2.9-saved-tensors there, TE 2.10 on by "
    "legacy-executor-loses-te-from-te-2.10)",
    model=models.FP8_IN_DISABLED_AUTOCAST,
    seen=(
        "docs/results/h100-te2.9.0-te2.20.2-b1f1fda-switching-rows",
        "docs/results/h100-te2.9.0-85c5bb3-switching-models",
    ),
)
