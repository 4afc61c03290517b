"""Known upstream defect ``ddp-transform-rejects-input-grad``: thunder's DDP transform raises on an input that requires
grad: its gradient bucketing looks for an all-reduce behind the input's gradient too."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import BisectedBound, KnownDefect

ENTRY = KnownDefect(
    id="ddp-transform-rejects-input-grad",
    summary="thunder's DDP transform raises on an input that requires grad: its gradient bucketing looks "
    "for an all-reduce behind the input's gradient too",
    executors=(None,),
    signature=signatures.NO_ALLREDUCE_BEHIND_INPUT_GRAD,
    checks=(checks.DDP_TRANSFORM,),
    thunder=">=0.2.0.dev20240404,<0.2.4.dev20250608",
    te=">=1.6",
    without_te=True,
    cause="thunder/distributed/transforms/ddp.py optimize_allreduce_in_ddp_backward (via split_forward_backward, "
    "apply_bucketing_to_grad_allreduce) calls get_bsym_of_allreduce_of_grad on every backward output, the input's gradient "
    "too; with no all-reduce behind it the walk reaches C0/cotangents and check_type raises, whatever bucket_size_in_mb. "
    "Gone from 0.2.4.dev20250608: the joint forward-backward trace (delay_trace_split=True, PR #2102) buckets nothing; the "
    "walk is unchanged through 0.2.6",
    seen=("docs/results/cpu-ddp-transform-2024", "docs/results/h200-te1.8.0-ce65f32",
          "docs/results/cpu-bisect-ddp-transform"),
    bounds=(BisectedBound("thunder", "<0.2.4.dev20250608", "docs/results/cpu-bisect-ddp-transform/fix/bisect.json"),),
)
