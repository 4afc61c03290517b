"""Known upstream defect ``legacy-executor-loses-te-from-te-2.10``: thunder 0.2.6's legacy TE executor claims no linear
with TE 2.10+: a silent fallback to torch."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="legacy-executor-loses-te-from-te-2.10",
    summary="thunder 0.2.6's legacy TE executor claims no linear with TE 2.10+: a silent fallback to torch",
    executors=("legacy",),
    signature=signatures.LEGACY_MODULE_LOST_TE,
    checks=checks.TE_RUNS,
    thunder=">=0.2.0.dev0,<0.2.7",
    te=">=2.10",
    cause="thunder/executors/transformer_engine_v1ex.py (transformer_engineex.py before 0.2.6.dev20250928) imports "
    "CPUOffloadEnabled from transformer_engine.pytorch.cpu_offload in try/except; TE 2.10 removed it, so TE_AVAILABLE = "
    "False and the checker declines every linear. Read in every build 0.2.0.dev20240404 .. 0.2.7.dev20251109 "
    "(docs/results/wheels-legacy-cpu-offload-import): nothing to bisect. Run with TE 2.12-2.20 on 0.2.5, 0.2.6.dev20251019, "
    "0.2.6. Removed in 0.2.7.dev20251130 (PR #2762): no fix expected",
    model=models.TORCH_RUNS_EVERY_LINEAR,
    seen=("docs/results/h200-matrix-8a03814", "docs/results/h200-te2.12.0-89202c6", "docs/results/h200-x2-te2.12.0-9e2f3e1",
          "docs/results/h200-x2-te2.16.1-9e2f3e1", "docs/results/h200-x2-te2.20.2-07a1392",
          "docs/results/h200-te2.20.2-c71c746"),
    fixed=(FixSeen("thunder", "<0.2.7", "docs/results/h100-matrix-a42f2cc/te-2.20.2/te2.20.2-th0.2.7.dev20251130.json.gz"),),
)
