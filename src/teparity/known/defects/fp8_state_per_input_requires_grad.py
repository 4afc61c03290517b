"""Known upstream defect ``fp8-state-per-input-requires-grad``: a forward whose input requires no grad, between
training steps whose input does (an evaluation forward), runs in a thunder cache entry of its own with a fresh TE FP8
state, where eager TE keeps one state per module."""

from __future__ import annotations

from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="fp8-state-per-input-requires-grad",
    summary="a forward whose input requires no grad between training steps whose input does (an evaluation forward) "
    "runs in a thunder cache entry of its own with a fresh TE FP8 state (scale 1, empty amax history), where eager TE "
    "keeps one state per module; the training entry goes on with its own state",
    executors=("legacy", "functional"),
    signature=signatures.STATE_PER_INPUT_SHAPE,
    checks=("fp8-switched[evaluation-between]", "ddp-fp8-switched[evaluation-between]"),
    thunder=">=0.2.3",
    te=">=2.9",
    cause="thunder's default cache (CACHE_OPTIONS.CONSTANT_VALUES) keys an entry on each input tensor's metadata, "
    "requires_grad included (the prologue's check_tensor_shape_and_metadata); each entry's execution trace has its own "
    "TE state (legacy: new TELinears; functional: new get_te_fp8_state states). The defect of fp8-state-per-input-shape, "
    "with requires_grad as the key",
    model=models.STATE_PER_ENTRY,
    seen=(
        "docs/results/h100-te2-7cd3218-new-rows",
        "docs/results/h100-te2.9.0-4bf1ef8-new-rows-bench",
        "docs/results/h100-te2.9.0-85c5bb3-switching-models",
    ),
)
