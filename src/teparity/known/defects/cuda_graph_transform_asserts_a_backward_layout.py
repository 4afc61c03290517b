"""Known upstream defect ``cuda-graph-transform-asserts-a-backward-layout``: thunder's CUDA graph transform cannot take
a program whose linears TE holds: it asserts a backward trace layout the TE executors' backward does not have."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="cuda-graph-transform-asserts-a-backward-layout",
    summary="thunder's CUDA graph transform cannot take a program whose linears TE holds: it asserts that the backward "
    "trace's tenth symbol unpacks saved_for_backward, which the TE executors' backward trace does not do",
    executors=("legacy", "functional"),
    signature=signatures.CUDA_GRAPH_BACKWARD_LAYOUT,
    checks=(checks.CUDA_GRAPHS,),
    thunder=">=0.2.3",
    te=">=2.9",
    cause="thunder/transforms/cudagraph.py CUDAGraphTransform.transform_trace_post_optimization: on backward_fn it "
    "asserts `trace.bound_symbols[9].sym.name == \"unpack_sequence\"` (index 8 in 0.2.4), a layout of a backward with no "
    "TE symbols before that unpack. thunder 0.2.4's legacy executor (thunder/executors/transformer_engineex.py) fails "
    "first: TE's restore_from_saved is given no saved tensors (TypeError: 'NoneType' object is not iterable)",
    seen=(
        "docs/results/h100-te2.9.0-te2.20.2-b1f1fda-switching-rows",
        "docs/results/h100-te2.9.0-85c5bb3-switching-models",
        "docs/results/h100-te2.20.2-te2.12.0-5c9f6f5",
    ),
)
