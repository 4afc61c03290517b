"""Known upstream defect ``legacy-backward-sync-dropped-by-delayed-split``: the legacy TE executor's backward FP8 sync
is missing from the backward trace and never runs: thunder's new default trace split bypasses the function that
inserts it."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import BisectedBound, KnownDefect

ENTRY = KnownDefect(
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
    seen=("docs/results/cpu-bisect-legacy-sync-split", "docs/results/cpu-trace-builds-37d5c96"),
    bounds=(BisectedBound("thunder", ">=0.2.4.dev20250608", "docs/results/cpu-bisect-legacy-sync-split/introduced/bisect.json"),
            BisectedBound("thunder", "<=0.2.4.dev20250622", "docs/results/cpu-bisect-legacy-sync-split/fix/bisect.json")),
)
