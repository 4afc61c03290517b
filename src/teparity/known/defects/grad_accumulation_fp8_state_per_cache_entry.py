"""Known upstream defect ``grad-accumulation-fp8-state-per-cache-entry``: under skip_data_parallel_grad_sync each
thunder cache entry keeps its own TE FP8 state, so the synced micro-batch does not see the amaxes of the ones before
it."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="grad-accumulation-fp8-state-per-cache-entry",
    summary="under skip_data_parallel_grad_sync each thunder cache entry keeps its own TE FP8 state, "
    "so the synced micro-batch does not see the amaxes of the ones before it",
    executors=("legacy", "functional"),
    signature=signatures.FP8_STATE_PER_CACHE_ENTRY,
    checks=(checks.DDP_GRAD_ACCUMULATION, checks.DDP_LLAMA_GRAD_ACCUMULATION, checks.FSDP_GRAD_ACCUMULATION),
    thunder=">=0.2.0.dev20240609",
    te=">=1.6",
    cause="thunder/__init__.py keys the cache on get_skip_data_parallel_grad_sync() (cache_info['no_grad_sync']), so the "
    "no-sync micro-batch gets its own cache entry and TE state (legacy: new TELinears, transformer_engine_v1ex.py; "
    "functional: new get_te_fp8_state states, transformer_engineex_impl.py); eager TE's micro-batches share one fp8_meta. "
    "Run on 0.2.6 and 0.2.7 dev builds with TE 2.9-2.20; read, not run, from 0.2.0.dev20240609 (TE 1.6+) on",
    model=models.STATE_PER_ENTRY,
    seen=("docs/results/h200-matrix-8a03814", "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-te2.12.0-89202c6"),
)
