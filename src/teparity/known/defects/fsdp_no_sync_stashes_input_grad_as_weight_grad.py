"""Known upstream defect ``fsdp-no-sync-stashes-input-grad-as-weight-grad``: under thunder's FSDP, a no-sync backward
through the functional TE executor stashes each linear's input gradient as its weight's: the accumulated weight
gradients are wrong wherever the linear's input requires grad."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="fsdp-no-sync-stashes-input-grad-as-weight-grad",
    summary="under thunder's FSDP, a no-sync backward through the functional TE executor stashes each linear's input "
    "gradient as its weight's: the accumulated weight gradients are wrong wherever the linear's input requires grad",
    executors=("functional",),
    signature=signatures.PARTED_FROM_STEP_ZERO_OF_MICRO_BATCHES,
    checks=(checks.FSDP_GRAD_ACCUMULATION,),
    thunder=">=0.2.3,<0.2.4.dev20250608",
    te=">=2.0",
    cause="thunder/distributed/transforms/fsdp.py stash_unsharded_grads_and_return_none_as_grads stashes the first "
    "output of the symbol that produced each unsharded gradient; the functional executor's weight gradient comes out of "
    "its backward FP8 update, _te_fp8_amax_and_scale_update(tokens=(grad_a, grad_w)) (transformer_engine_v2ex_impl.py "
    "_te_linear_grad_transform), whose first output is the input's gradient. Where that has the weight's shape (the "
    "gate's 32-64-16 case at batch 16: linear 1) it is accumulated as the weight's; the first linear's input needs no "
    "grad in the no-sync micro-batch. Read in 0.2.3; shown on the CPU without TE by a stand-in executor with that "
    "update's shape (docs/results/cpu-fsdp-probe): "
    "1.weight parts, the rest is exact. Run on 0.2.3 with TE 2.9.0; from 0.2.4.dev20250608 the stash is skipped "
    "(fsdp-no-sync-loses-accumulated-gradients); from TE 2.10 the functional executor claims no linear "
    "(functional-executor-loses-te-from-te-2.10)",
    model=models.INPUT_GRAD_STASHED,
    seen=("docs/results/h200-matrix-16708bb",),
    fixed=(FixSeen("thunder", "<0.2.4.dev20250608", "docs/results/cpu-bisect-fsdp-nosync-2024/verdicts.json"),),
)
