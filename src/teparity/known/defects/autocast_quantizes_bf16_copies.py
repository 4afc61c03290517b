"""Known upstream defect ``autocast-quantizes-bf16-copies``: under torch.autocast thunder casts the fp32 input and
weight to bfloat16 before TE quantizes them, where eager TE quantizes the fp32 tensors: the FP8 values differ by
double rounding."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="autocast-quantizes-bf16-copies",
    summary="under torch.autocast thunder casts the fp32 input and weight to bfloat16 before TE quantizes them, "
    "where eager TE quantizes the fp32 tensors: the FP8 values differ by double rounding",
    executors=("legacy", "functional"),
    signature=signatures.BF16_COPIES_QUANTIZED,
    checks=(checks.TORCH_AUTOCAST,),
    thunder=">=0.2.0.dev20240728",
    te=">=1.8",
    cause="thunder/transforms/autocast.py _linear_autocast_impl downcasts input and weight (maybe_downcast_to) before "
    "prims.linear; eager te.Linear (module/linear.py _Linear.forward) quantizes the fp32 tensors. Double rounding near E4M3 "
    "midpoints, carried by E5M2 gradients, exceeds TE's tolerances from step 0. Run on 0.2.3 .. 0.2.7 dev builds with TE "
    "2.9-2.20 and on 0.2.0.dev20240728, dev20240901 with TE 1.8.0 (legacy); builds between read, not run",
    model=models.QUANTIZED_BF16_COPIES,
    seen=("docs/results/h200-te2.20.2-aa780f0-features", "docs/results/h200-te2.9.0-65ae0b1-features", "docs/results/h200-te2.9.0-2bafd7a", "docs/results/h200-te2.9.0-28d36b3", "docs/results/h200-te1.8.0-4306794"),
)
