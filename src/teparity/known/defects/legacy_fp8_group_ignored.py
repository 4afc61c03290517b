"""Known upstream defect ``legacy-fp8-group-ignored``: thunder's legacy TE executor wraps its forward in fp8_autocast
without the caller's fp8_group: amaxes are reduced over the world."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="legacy-fp8-group-ignored",
    summary="thunder's legacy TE executor wraps its forward in fp8_autocast without the caller's fp8_group: "
    "amaxes are reduced over the world",
    executors=("legacy",),
    signature=signatures.AUTOCAST_WITHOUT_GROUP,
    checks=checks.FP8_GROUPS,
    thunder=">=0.2.0.dev0,<0.2.7",
    te=">=1.6",
    cause="thunder/executors/transformer_engine_v1ex.py TE_CTX_STR: fp8_autocast(fp8_recipe=...) with no fp8_group. Run "
    "with TE 2.9-2.20; TE 1.6-1.8 read, not run: the same TE_CTX_STR (transformer_engineex.py before 0.2.6) is in every "
    "build 0.2.0.dev20240609 .. 0.2.6",
    model=models.WORLD_REDUCTION,
    seen=("docs/results/h200-matrix-8a03814", "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-x2-te2.9.0-e797194",
          "docs/results/h200-x4-te2.9.0-dcd92ab"),
    fixed=(FixSeen("thunder", "<0.2.7", "docs/results/h100-matrix-a42f2cc/te-2.9.0/te2.9.0-th0.2.7.dev20251130.json.gz"),),
)
