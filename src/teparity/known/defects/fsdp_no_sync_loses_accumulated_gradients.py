"""Known upstream defect ``fsdp-no-sync-loses-accumulated-gradients``: under thunder's FSDP, ThunderModule.no_sync
loses the gradients of the micro-batches it spans: nothing reaches the reduce-scatter it runs on leaving."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="fsdp-no-sync-loses-accumulated-gradients",
    summary="under thunder's FSDP, ThunderModule.no_sync loses the gradients of the micro-batches it spans: nothing "
    "reaches the reduce-scatter it runs on leaving",
    executors=("legacy", "functional"),
    signature=signatures.FSDP_NO_SYNC_STASHED_NOTHING,
    checks=(checks.FSDP_GRAD_ACCUMULATION,),
    thunder=">=0.2.0.dev20240811,<0.2.0.dev20250119 || >=0.2.4.dev20250608",
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
    "defect, no TE needed: on the CPU without TE (ZeRO2 and ZeRO3: "
    "docs/results/cpu-fsdp-probe) 0.2.4.dev20250601 stashes every parameter and accumulates exactly, "
    "0.2.4.dev20250608 .. 0.2.7.dev20260201 stash nothing and keep the last micro-batch's gradients alone; with "
    "delay_trace_split=False dev20250608's ZeRO3 stashes again. Run with both executors on 0.2.4 .. 0.2.7.dev20260201 "
    "with TE 2.9.0 and 2.20.2 (gloo); not run on NCCL",
    seen=("docs/results/h200-te2.9.0-72fa083", "docs/results/h200-te2.20.2-72fa083", "docs/results/h200-te2.20.2-0901221",
          "docs/results/h200-matrix-cceeca7", "docs/results/cpu-bisect-fsdp-nosync-2024"),
    fixed=(FixSeen("thunder", "<0.2.0.dev20250119", "docs/results/cpu-bisect-fsdp-nosync-2024/verdicts.json"),),
)
