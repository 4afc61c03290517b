"""Known upstream defect ``fsdp-no-sync-stash-breaks-on-fused-linear-backward``: under thunder's FSDP, a no-sync
backward through the legacy TE executor fails to compile: thunder's stash of unsharded gradients takes one gradient
per backward symbol, and a TE linear's backward makes three."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="fsdp-no-sync-stash-breaks-on-fused-linear-backward",
    summary="under thunder's FSDP, a no-sync backward through the legacy TE executor fails to compile: thunder's "
    "stash of unsharded gradients takes one gradient per backward symbol, and a TE linear's backward makes three",
    executors=("legacy",),
    signature=signatures.FSDP_NO_SYNC_STASH_LOST_A_PRODUCER,
    checks=(checks.FSDP_GRAD_ACCUMULATION,),
    thunder=">=0.2.0.dev20240505,<0.2.4.dev20250608",
    te=">=1.6",
    cause="thunder/distributed/transforms/fsdp.py stash_unsharded_grads_and_return_none_as_grads keys the symbol that "
    "produced each unsharded gradient and stashes its first output: the legacy executor's te_functional_linear_backward "
    "returns (grad_input, grad_weight, grad_bias) from one symbol, so the bias's entry is overwritten, the input's gradient "
    "is stashed under the weight's name and the bias's reduce-scatter is deleted while the return still names it; dce "
    "(2024 builds) or the trace interpreter's read (0.2.2, 0.2.3) then raises KeyError on that proxy. Function read in dev20240818 and 0.2.3 (identical); shown on the CPU without TE by a "
    "stand-in executor with that backward's shape (docs/results/cpu-fsdp-probe): dev20240505 (the first build with the stash) "
    ".. 0.2.4.dev20250601 raise, dev20250608 skips the stash (fsdp-no-sync-loses-accumulated-gradients). Run with TE 1.8.0 "
    "on dev20240728, dev20240818, dev20240901, with TE 2.9.0 on 0.2.2 and 0.2.3 (KeyError before the TE linear runs); "
    "from TE 2.10 the legacy executor claims no linear (legacy-executor-loses-te-from-te-2.10)",
    seen=("docs/results/h200-te1.8.0-b4f3e73", "docs/results/h200-matrix-4a18837"),
    fixed=(FixSeen("thunder", "<0.2.4.dev20250608", "docs/results/cpu-bisect-fsdp-nosync-2024/verdicts.json"),),
)
