"""Known upstream defect ``functional-declines-current-scaling``: thunder's functional TE executor declines every
linear under Float8CurrentScaling and Float8BlockScaling (with a warning): thunder runs them in torch where eager TE
runs them in FP8."""

from __future__ import annotations

from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="functional-declines-current-scaling",
    summary="thunder's functional TE executor declines every linear under Float8CurrentScaling and "
    "Float8BlockScaling (with a warning): thunder runs them in torch where eager TE runs them in FP8",
    executors=("functional",),
    signature=signatures.CURRENT_SCALING_LEFT_TO_TORCH,
    checks=("numerics[current]", "numerics[blockwise]"),
    thunder=">=0.2.6.dev20251005",
    te=">=2.2",
    cause="thunder/executors/transformer_engineex_impl.py _linear_checker accepts DelayedScaling, MXFP8BlockScaling and "
    "NVFP4BlockScaling only; for another recipe it warns '... TE wont be used' and returns False, so torch takes the "
    "linear. Read in the wheels: the warning from 0.2.6.dev20251005 on; up to dev20250928 the checker asserts instead "
    "(functional-checker-asserts-on-current-scaling)",
    model=models.TORCH_RUNS_EVERY_LINEAR,
    seen=("docs/results/h200-te2.9.0-72fa083", "docs/results/h200-te2.20.2-72fa083", "docs/results/h200-te2.20.2-0901221", "docs/results/h200-te2.20.2-640b276-combinations"),
)
