"""Known upstream defect ``fp8-state-per-input-shape``: thunder compiles a cache entry per input shape, each with its
own TE FP8 state: a step of a new shape starts a fresh one, where eager TE keeps one state per module."""

from __future__ import annotations

from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="fp8-state-per-input-shape",
    summary="thunder compiles a cache entry per input shape, each with its own TE FP8 state: a step of a new shape "
    "starts a fresh one, where eager TE keeps one state per module",
    executors=("legacy", "functional"),
    signature=signatures.STATE_PER_INPUT_SHAPE,
    checks=("new-input-shape[sequence-length-default]", "new-input-shape[short-last-batch-default]"),
    thunder=">=0.2.0.dev20240728",
    te=">=1.6",
    cause="thunder's default cache (CACHE_OPTIONS.CONSTANT_VALUES) keys an entry on the input's shape; each entry's "
    "execution trace has its own TE state (legacy: new TELinears, transformer_engine_v1ex.py; functional: new "
    "get_te_fp8_state states, a stateful operator per bound symbol, transformer_engineex_impl.py); eager te.Linear "
    "keeps one fp8_meta whatever the shape. The defect of grad-accumulation-fp8-state-per-cache-entry, with the "
    "shape as the key",
    model=models.STATE_PER_ENTRY,
    seen=("docs/results/h200-te2.9.0-13aaff2-combinations", "docs/results/h200-te2.20.2-640b276-combinations"),
)
