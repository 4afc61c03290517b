"""Known upstream defect ``no-grad-forward-left-to-torch``: under torch.no_grad neither TE executor claims a linear:
thunder runs the inference forward in torch."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="no-grad-forward-left-to-torch",
    summary="under torch.no_grad neither TE executor claims a linear: thunder runs the inference forward in torch",
    executors=("legacy", "functional"),
    signature=signatures.NO_GRAD_LEFT_TO_TORCH,
    checks=(checks.INFERENCE,),
    thunder=">=0.2.0.dev20241124",
    te=">=1.6",
    cause="both executors register TE for prims.linear only (transformer_engineex_impl.py, transformer_engine_v1ex.py); "
    "from 0.2.0.dev20241124 a no-grad trace keeps ltorch.linear, which the torch executor claims whole. Up to dev20241117 "
    "TE held it (CPU stand-in executor: docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd; TE 1.8.0 on dev20240728, "
    "dev20240901 passed). Run on 0.2.2 .. 0.2.6 with TE 2.9.0, 0.2.6 and 0.2.7.dev20260201 with TE 2.20.2",
    model=models.TORCH_RUNS_EVERY_LINEAR,
    seen=("docs/results/h200-te2.20.2-aa780f0-features", "docs/results/h200-te1.8.0-4306794"),
)
