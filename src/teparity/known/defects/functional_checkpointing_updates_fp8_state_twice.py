"""Known upstream defect ``functional-checkpointing-updates-fp8-state-twice``: on the weekly builds 0.2.5.dev20250706
.. 0.2.5.dev20250803, under activation checkpointing, the backward's recomputation updates a forward FP8 state the
forward already updated that step."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import BisectedBound, KnownDefect

ENTRY = KnownDefect(
    id="functional-checkpointing-updates-fp8-state-twice",
    summary="on the weekly builds 0.2.5.dev20250706 .. 0.2.5.dev20250803, under activation checkpointing, the backward's recomputation "
    "updates a forward FP8 state the forward already updated that step",
    executors=("functional",),
    signature=signatures.RECOMPUTE_UPDATES_THE_FORWARD_STATE_AGAIN,
    checks=(checks.ACTIVATION_CHECKPOINTING,),
    thunder=">=0.2.5.dev20250706,<=0.2.5.dev20250803",
    te=">=2.9",
    cause="seen, not read in source: a checkpointed region's backward runs te_fp8_amax_and_scale_update on states the "
    "forward updated that step; thunder.jit and thunderfx, both recipes. _te_activation_checkpointing_transform fixes it in "
    "0.2.5.dev20250810 (docs/results/wheels-functional-checkpointing-transform; GPU bisect clean). First bad: "
    "0.2.5.dev20250706 (TE 2.9.0, docs/results/h200-te2.9.0-04f6fc3-bisects/twice-from); dev20250629 recomputes no TE "
    "linear (functional-checkpointing-saves-te-linears), so that log has no boundary",
    seen=("docs/results/h200-te2.9.0-363ddd5", "docs/results/h200-te2.9.0-b98ccf1-bisects", "docs/results/h200-te2.9.0-04f6fc3"),
    bounds=(BisectedBound("thunder", "<=0.2.5.dev20250803", "docs/results/h200-te2.9.0-b98ccf1-bisects/twice-last.json"),),
)
