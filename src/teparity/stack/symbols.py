"""The names under which thunder's TE executors appear in its traces and modules: what the trace checks look
for, the same in every build that has the executor (docs/facts.md)."""

from __future__ import annotations

#: Name and id of the legacy executor's backward FP8 sync symbol.
BACKWARD_SYNC_SYMBOL = "te_sync_fp8_meta_bwd"


#: Symbols that show a TE executor ran a linear, in the forward and backward execution traces.
TE_FORWARD_LINEAR_PREFIX: dict[str, str] = {"legacy": "te_linear_", "functional": "te_functional_linear_fwd"}


TE_BACKWARD_LINEAR_PREFIX: dict[str, str] = {
    "legacy": "te_functional_linear_backward",
    "functional": "te_functional_linear_bwd",
}


#: The functional executor's per-linear amax/scale update and its run-time recipe lookup.
FUNCTIONAL_UPDATE_SYMBOL = "te_fp8_amax_and_scale_update"


FUNCTIONAL_RECIPE_PREFIX = "get_te_fp8_recipe"


#: The legacy executor's module-level helper that inserts the sync into the backward trace.
SYNC_INSERTION_HELPER = "_insert_bwd_fp8_meta_sync"


#: thunder's CUDA graph transform's regions (``CUDAGraph0``, ...): fusions whose symbols run in a captured graph.
CUDA_GRAPH_REGION_PREFIX = "CUDAGraph"
