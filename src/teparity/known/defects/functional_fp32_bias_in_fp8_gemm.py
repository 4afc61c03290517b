"""Known upstream defect ``functional-fp32-bias-in-fp8-gemm``: thunder's functional TE executor passes an fp32 bias
into TE's FP8 GEMM, which cuBLASLt rejects."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="functional-fp32-bias-in-fp8-gemm",
    summary="thunder's functional TE executor passes an fp32 bias into TE's FP8 GEMM, which cuBLASLt rejects",
    executors=("functional",),
    signature=signatures.FP32_BIAS_GEMM,
    checks=(checks.NUMERICS_FP32_BIAS,),
    thunder=">=0.2.3",
    te=">=2.9",
    cause="thunder/executors/transformer_engineex_impl.py _linear_fwd_impl calls BasicLinear._functional_forward(bias=bias, "
    "with_quantized_compute=True) with the fp32 bias, which general_gemm fuses into the FP8 GEMM; cuBLASLt has no such "
    "GEMM. Eager te.Linear casts the bias to bf16 for FP8 GEMMs (module/linear.py _Linear.forward); te.ops does not fuse an "
    "fp32 bias",
    seen=("docs/results/h200-matrix-8a03814", "docs/results/h200-x2-te2.9.0-e797194", "docs/results/h200-te2.9.0-89202c6",
          "docs/results/h200-te2.12.0-89202c6", "docs/results/h200-te2.9.0-65ae0b1-features", "docs/results/h200-te2.9.0-2bafd7a"),
)
