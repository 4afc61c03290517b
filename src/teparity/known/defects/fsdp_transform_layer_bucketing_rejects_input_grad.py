"""Known upstream defect ``fsdp-transform-layer-bucketing-rejects-input-grad``: thunder's FSDP transform with LAYER or
BLOCK bucketing raises on an input that requires grad: its reduce-scatter bucketing looks for a parameter behind the
input's gradient too."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import BisectedBound, KnownDefect

ENTRY = KnownDefect(
    id="fsdp-transform-layer-bucketing-rejects-input-grad",
    summary="thunder's FSDP transform with LAYER or BLOCK bucketing raises on an input that requires grad: its "
    "reduce-scatter bucketing looks for a parameter behind the input's gradient too",
    executors=(None, "legacy", "functional"),
    signature=signatures.NO_BUCKET_FOR_THE_INPUT_GRAD,
    checks=tuple(checks.row(check, f"{sharding}-{bucketing}") for check in (checks.FSDP_TRANSFORM, checks.FSDP)
                 for sharding in ("zero2", "zero3") for bucketing in ("layer", "block")),
    thunder=">=0.2.0.dev20240404,<0.2.4.dev20250608",
    te=">=1.6",
    without_te=True,
    cause="thunder/distributed/transforms/fsdp.py create_map_from_unsharded_grad_to_bucket (via "
    "apply_bucketing_to_backward_trace) requires every backward output to be a bucketed parameter's gradient; the input's "
    "gradient is not: utils.check raises 'Invalid index=0'; NONE bucketing passes. BLOCK differs from LAYER only in "
    "naming its buckets (thunder/distributed/__init__.py get_extract_bucket_name_from_tensor_proxy) and meets the same "
    "check. Run on the CPU, 0.2.0.dev20240404 .. 0.2.4.dev20250601; fix bisected to 0.2.4.dev20250608 (as "
    "ddp-transform-rejects-input-grad), where delay_trace_split=True leaves FSDPCommBucketing out; BLOCK the same on the "
    "CPU (docs/results/cpu-fsdp-probe: dev20250601 raises, dev20250608 matches). The fsdp tier's rows raise before any TE "
    "linear: run with TE 2.20.2 on 0.2.2 and 0.2.3, with TE 1.8.0 on the 2024 builds",
    seen=("docs/results/cpu-bisect-fsdp-layer", "docs/results/h200-te2.9.0-2bafd7a", "docs/results/h200-te2.9.0-28d36b3", "docs/results/h200-matrix-cceeca7", "docs/results/h200-te1.8.0-b4f3e73"),
    bounds=(BisectedBound("thunder", "<0.2.4.dev20250608", "docs/results/cpu-bisect-fsdp-layer/fix/bisect.json"),),
)
