"""The known defects of thunder's legacy TE executor (``transformer_engine_v1ex.py``; ``transformer_engineex.py``
before 0.2.6.dev20250928): TE lost from TE 2.10, TE 2.9's saved tensors miscounted, the backward FP8 sync dropped by the
delayed trace split."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import BisectedBound, KnownDefect
from teparity.known.runs import (
    CLEAN_RELEASES_RUN_TE29,
    CPU_BUILDS_RUN,
    ENTRY_BISECTS_TE29,
    MATRIX_RUN,
    RELEASES_RUN_TE29,
    RELEASES_WEEKLIES_RUN_TE29,
    SEEN_TE29,
    SYNC_SPLIT_BISECT,
    TE220_THUNDER025_RUN,
    VERSIONS_RUN_TE29,
)

LEGACY_EXECUTOR_LOSES_TE_FROM_TE_2_10 = KnownDefect(
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
    seen=(MATRIX_RUN, "docs/results/h200-te2.12.0-89202c6", "docs/results/h200-x2-te2.12.0-9e2f3e1",
          "docs/results/h200-x2-te2.16.1-9e2f3e1", "docs/results/h200-x2-te2.20.2-07a1392",
          TE220_THUNDER025_RUN),
)

LEGACY_EXECUTOR_MISCOUNTS_TE_2_9_SAVED_TENSORS = KnownDefect(
    id="legacy-executor-miscounts-te-2.9-saved-tensors",
    summary="thunder 0.2.2's and 0.2.3's legacy TE executor cannot unpack what TE 2.9's _Linear forward "
    "saves: every TE linear raises ValueError in the computation trace",
    executors=("legacy",),
    signature=signatures.LEGACY_UNPACK_AT_TE_LINEAR,
    checks=checks.TE_RUNS + checks.LEGACY_SYNC,
    thunder=">=0.2.2.dev0,<=0.2.4.dev20250622",
    te=SEEN_TE29,
    cause="read in the wheels: the trace unpacks te_linear_N's result into as many saved tensors as its meta names (5 in "
    "0.2.2; 8 in 0.2.3, via _get_num_saved_tensors), but TE 2.9.0's _Linear.forward saves 6, so the unpack raises. Run with "
    "TE 2.9.0 only. GPU bisects: fixed in 0.2.4 (input_quantizer.internal = True there, not shown to be the fix); starts at "
    "0.2.2.dev0, 0.2.1 failing otherwise (docs/results/h200-te2.9.0-04f6fc3-bisects/miscount-from)",
    seen=(VERSIONS_RUN_TE29, RELEASES_RUN_TE29, RELEASES_WEEKLIES_RUN_TE29, CLEAN_RELEASES_RUN_TE29),
    bounds=(BisectedBound("thunder", "<=0.2.4.dev20250622", f"{ENTRY_BISECTS_TE29}/miscount-fix/bisect.json"),),
)

LEGACY_BACKWARD_SYNC_DROPPED_BY_DELAYED_SPLIT = KnownDefect(
    id="legacy-backward-sync-dropped-by-delayed-split",
    summary="the legacy TE executor's backward FP8 sync is missing from the backward trace and never runs: "
    "thunder's new default trace split bypasses the function that inserts it",
    executors=("legacy",),
    signature=signatures.NO_BACKWARD_SYNC_AT_ALL,
    checks=(checks.BWD_SYNC_PLACEMENT, checks.BWD_SYNC_RUNS_ONCE),
    thunder=">=0.2.4.dev20250608,<=0.2.4.dev20250622",
    te=">=1.6",
    without_te=True,
    cause="read in the wheels: 0.2.4.dev20250608 defaults delay_trace_split to True (thunder/__init__.py, "
    "thunder/transforms/autodiff.py), skipping torch_autograd.split_forward_backward, the only caller of "
    "transformer_engineex._transformer_engine_bwd_fp8_meta_sync; 0.2.4 calls transformer_engine_v1_bwd_fp8_meta_sync from "
    "autodiff.py. Run on the CPU only (teparity's recorder counts the sync); on a GPU with TE, inferred from the source",
    seen=(SYNC_SPLIT_BISECT, CPU_BUILDS_RUN),
    bounds=(BisectedBound("thunder", ">=0.2.4.dev20250608", f"{SYNC_SPLIT_BISECT}/introduced/bisect.json"),
            BisectedBound("thunder", "<=0.2.4.dev20250622", f"{SYNC_SPLIT_BISECT}/fix/bisect.json")),
)
