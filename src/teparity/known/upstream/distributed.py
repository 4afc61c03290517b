"""The known defects of thunder's distributed transforms (``thunder/distributed``): the FSDP no-sync stash of
unsharded gradients (it loses them, breaks on a fused linear backward, or stashes an input's gradient as the weight's),
and the DDP and FSDP gradient bucketing that rejects an input that requires grad."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import BisectedBound, KnownDefect
from teparity.known.runs import (
    FSDP_LAYER_BISECT,
    MATRIX,
    MATRIX_TE220,
    RELEASES_RUN_TE29,
    TE18_RUN_B4F3E73,
    VERSIONS_RUN_TE29,
)

FSDP_NO_SYNC_LOSES_ACCUMULATED_GRADIENTS = KnownDefect(
    id="fsdp-no-sync-loses-accumulated-gradients",
    summary="under thunder's FSDP, ThunderModule.no_sync loses the gradients of the micro-batches it spans: nothing "
    "reaches the reduce-scatter it runs on leaving",
    executors=("legacy", "functional"),
    signature=signatures.FSDP_NO_SYNC_STASHED_NOTHING,
    checks=(checks.FSDP_GRAD_ACCUMULATION,),
    thunder=">=0.2.0.dev20240811,<0.2.0.dev20250119 || >=0.2.4.dev20250608,<0.2.8",
    te=">=1.6",
    without_te=True,
    cause="thunder/distributed/transforms/fsdp.py stash_unsharded_grads_and_return_none_as_grads is to leave each "
    "parameter's unsharded gradient in _thunder_fsdp_unsharded_grad for thunder/distributed/__init__.py _sync_grads, "
    "which reduce-scatters them when no_sync ends and returns early, silently, where it finds none. Two causes, one "
    "loss. (1) To dev20250112, _sync_grads looks on the ThunderModule's parameters, while under fsdp(jit(module)) (the "
    "construction from dev20240811) the backward stashes on the original module's: found on the CPU without TE, "
    "no_sync loses every no-sync gradient on each weekly build dev20240811 .. dev20250112 and keeps them from "
    "dev20250119 (which reads module._model's) to 0.2.4.dev20250601, while skip_data_parallel_grad_sync stashes on "
    "all (docs/results/cpu-bisect-fsdp-nosync-2024); on those builds the gate's tests are masked "
    "(fsdp-no-sync-stash-breaks-on-fused-linear-backward; no functional executor) and the reproduction shows it, "
    "also with TE 1.8.0 on dev20240901. (2) From 0.2.4.dev20250608 the stash's only caller, "
    "torch_autograd.split_forward_backward (FSDPCommBucketing.apply_bucketing_to_backward_trace), is skipped: "
    "thunder/__init__.py defaults delay_trace_split=True and takes grad_transform_on_trace instead, while "
    "ThunderFunction.backward still returns None for every gradient under no-sync: nothing is stashed. A thunder "
    "defect, no TE needed: on the CPU without TE (scripts/fsdp_probe.py, ZeRO2 and ZeRO3: "
    "docs/results/cpu-fsdp-probe) 0.2.4.dev20250601 stashes every parameter and accumulates exactly, "
    "0.2.4.dev20250608 .. 0.2.7.dev20260201 stash nothing and keep the last micro-batch's gradients alone; with "
    "delay_trace_split=False dev20250608's ZeRO3 stashes again. Run with both executors on 0.2.4 .. 0.2.7.dev20260201 "
    "with TE 2.9.0 and 2.20.2 (gloo); not run on NCCL",
    seen=("docs/results/h200-te2.9.0-72fa083", "docs/results/h200-te2.20.2-72fa083", "docs/results/h200-te2.20.2-0901221",
          MATRIX_TE220, "docs/results/cpu-bisect-fsdp-nosync-2024"),
)

FSDP_NO_SYNC_STASH_BREAKS_ON_FUSED_LINEAR_BACKWARD = KnownDefect(
    id="fsdp-no-sync-stash-breaks-on-fused-linear-backward",
    summary="under thunder's FSDP, a no-sync backward through the legacy TE executor fails to compile: thunder's "
    "stash of unsharded gradients takes one gradient per backward symbol, and a TE linear's backward makes three",
    executors=("legacy",),
    signature=signatures.FSDP_NO_SYNC_STASH_LOST_A_PRODUCER,
    checks=(checks.FSDP_GRAD_ACCUMULATION,),
    thunder=">=0.2.0.dev20240505,<0.2.4.dev20250608",
    te=">=1.6,<2.10",
    cause="thunder/distributed/transforms/fsdp.py stash_unsharded_grads_and_return_none_as_grads keys the symbol that "
    "produced each unsharded gradient and stashes its first output: the legacy executor's te_functional_linear_backward "
    "returns (grad_input, grad_weight, grad_bias) from one symbol, so the bias's entry is overwritten, the input's gradient "
    "is stashed under the weight's name and the bias's reduce-scatter is deleted while the return still names it; dce "
    "(2024 builds) or the trace interpreter's read (0.2.2, 0.2.3) then raises KeyError on that proxy. Function read in dev20240818 and 0.2.3 (identical); shown on the CPU without TE by a "
    "stand-in executor with that backward's shape (docs/results/cpu-fsdp-probe): dev20240505 (the first build with the stash) "
    ".. 0.2.4.dev20250601 raise, dev20250608 skips the stash (fsdp-no-sync-loses-accumulated-gradients). Run with TE 1.8.0 "
    "on dev20240728, dev20240818, dev20240901, with TE 2.9.0 on 0.2.2 and 0.2.3 (KeyError before the TE linear runs); "
    "from TE 2.10 the legacy executor claims no linear (legacy-executor-loses-te-from-te-2.10)",
    seen=(TE18_RUN_B4F3E73, MATRIX),
)

FSDP_NO_SYNC_STASHES_INPUT_GRAD_AS_WEIGHT_GRAD = KnownDefect(
    id="fsdp-no-sync-stashes-input-grad-as-weight-grad",
    summary="under thunder's FSDP, a no-sync backward through the functional TE executor stashes each linear's input "
    "gradient as its weight's: the accumulated weight gradients are wrong wherever the linear's input requires grad",
    executors=("functional",),
    signature=signatures.PARTED_FROM_STEP_ZERO_OF_MICRO_BATCHES,
    checks=(checks.FSDP_GRAD_ACCUMULATION,),
    thunder=">=0.2.3,<0.2.4.dev20250608",
    te=">=2.0,<2.10",
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
)

DDP_TRANSFORM_REJECTS_INPUT_GRAD = KnownDefect(
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

FSDP_TRANSFORM_LAYER_BUCKETING_REJECTS_INPUT_GRAD = KnownDefect(
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
    seen=(FSDP_LAYER_BISECT, VERSIONS_RUN_TE29, RELEASES_RUN_TE29, MATRIX_TE220, TE18_RUN_B4F3E73),
    bounds=(BisectedBound("thunder", "<0.2.4.dev20250608", f"{FSDP_LAYER_BISECT}/fix/bisect.json"),),
)
