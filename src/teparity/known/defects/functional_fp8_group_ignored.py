"""Known upstream defect ``functional-fp8-group-ignored``: thunder's functional TE executor all-reduces amax histories
over the default process group, ignoring fp8_autocast's group."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import BisectedBound, KnownDefect

ENTRY = KnownDefect(
    id="functional-fp8-group-ignored",
    summary="thunder's functional TE executor all-reduces amax histories over the default process group, "
    "ignoring fp8_autocast's group",
    executors=("functional",),
    signature=signatures.UPDATE_WITHOUT_GROUP,
    checks=checks.FP8_GROUPS,
    thunder=">=0.2.5.dev20250824",
    te=">=2.9",
    cause="thunder/executors/transformer_engineex_impl.py _te_fp8_amax_and_scale_update_impl all-reduces state.amax_history "
    "over _get_default_group() (thunder PR #2404). GPU bisect, TE 2.9.0: 0.2.5.dev20250824 is the first build with it; "
    "before it amaxes were not reduced at all (functional-amax-not-reduced-across-ranks)",
    model=models.WORLD_REDUCTION,
    seen=("docs/results/h200-matrix-8a03814", "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-te2.12.0-89202c6",
          "docs/results/h200-x2-te2.9.0-e797194", "docs/results/h200-x4-te2.9.0-dcd92ab",
          "docs/results/h200-te2.9.0-04f6fc3"),
    bounds=(BisectedBound("thunder", ">=0.2.5.dev20250824", "docs/results/h200-te2.9.0-04f6fc3-bisects/group-from/bisect.json"),),
)
