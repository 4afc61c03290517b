"""The known upstream defects, as data: each entry's checks and executors, thunder and TE ranges, signature
(``teparity.known.signatures``), upstream cause and the committed runs that showed it."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import BisectedBound, KnownDefect

#: The run that showed every entry at once: all 12 TE releases x thunder 0.2.6 and 0.2.7.dev20260201.
_MATRIX_RUN = "docs/results/h200-matrix-8a03814"
_FEATURES_RUN = "docs/results/h200-te2.20.2-aa780f0-features"
_FEATURES_RUN_TE29 = "docs/results/h200-te2.9.0-65ae0b1-features"
#: thunder 0.2.4, 0.2.6.dev20251019, 0.2.6 and 0.2.7.dev20260201 with TE 2.9.0 at 82bfe86.
_FEATURES_RUN_TE29_82BFE86 = "docs/results/h200-te2.9.0-82bfe86-features"
#: thunder 0.2.2 .. 0.2.7.dev20260201 with TE 2.9.0 at one commit: 0.2.3 and 0.2.4 showed entries' signatures
#: outside their ranges then (near misses), which set the lower bounds below.
_VERSIONS_RUN_TE29 = "docs/results/h200-te2.9.0-2bafd7a"
#: The CPU runs of thunder's FSDP transform with LAYER bucketing: the oldest build, and the bisect of the fix.
_FSDP_LAYER_BISECT = "docs/results/cpu-bisect-fsdp-layer"
_SYNC_SPLIT_BISECT = "docs/results/cpu-bisect-legacy-sync-split"
_CPU_BUILDS_RUN = "docs/results/cpu-trace-builds-37d5c96"
#: thunder 0.2.2 .. 0.2.6 and 0.2.6.dev20251019 with TE 2.9.0 at 28d36b3, with the bounds above in place.
_RELEASES_RUN_TE29 = "docs/results/h200-te2.9.0-28d36b3"
#: thunder 0.2.5 and 0.2.6.dev20251019 with TE 2.20.2: the legacy executor's lost TE.
_TE220_THUNDER025_RUN = "docs/results/h200-te2.20.2-c71c746"
#: thunder 0.2.2, 0.2.3, 0.2.4, 0.2.5.dev20250803 and 0.2.7.dev20251214 with TE 2.20.2.
_TE220_OLDER_BUILDS_RUN = "docs/results/h200-te2.20.2-84520fd"
#: thunder 0.2.2 .. 0.2.6, 0.2.6.dev20251019 and two weekly builds with TE 2.9.0 at 363ddd5.
_RELEASES_WEEKLIES_RUN_TE29 = "docs/results/h200-te2.9.0-363ddd5"
#: The GPU bisects of entries' bounds with TE 2.9.0, each judged by its entry alone (``bisect --entry``).
_ENTRY_BISECTS_TE29 = "docs/results/h200-te2.9.0-363ddd5-bisects"
#: Two GPU fix bisects from 0.2.5.dev20250803 with TE 2.9.0 (the second cut off by its time limit).
_FIX_BISECTS_TE29 = "docs/results/h200-te2.9.0-b98ccf1-bisects"
#: thunder 0.2.2 .. 0.2.6 and 0.2.6.dev20251019 with TE 2.9.0 at 04f6fc3 (each exit 0).
_CLEAN_RELEASES_RUN_TE29 = "docs/results/h200-te2.9.0-04f6fc3"
#: Six GPU bisects of entries' bounds with TE 2.9.0 at 04f6fc3.
_RANGE_BISECTS_TE29 = "docs/results/h200-te2.9.0-04f6fc3-bisects"
#: The weekly builds those bisects moved into or out of ranges, with TE 2.9.0 at db1ecfc.
_WEEKLIES_RUN_TE29 = "docs/results/h200-te2.9.0-db1ecfc"
#: Seen with TE 2.9.0 only: the TE bound of the entries first seen there stops at the next release.
_SEEN_TE29 = ">=2.9,<2.10"

#: The gate with TE 1.8.0 on thunder 0.2.0.dev20240728 and dev20240901 (the CPU runs of 2024 builds behind the entries
#: it led to: docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd).
_TE18_RUN = "docs/results/h200-te1.8.0-4306794"
#: The gate with TE 1.8.0 on thunder 0.2.0.dev20240728, dev20240818 and dev20240901 at b4f3e73.
_TE18_RUN_B4F3E73 = "docs/results/h200-te1.8.0-b4f3e73"
#: The declared matrix's TE 2.20.2 stacks (thunder 0.2.2 .. 0.2.7.dev20260201) at one commit.
_MATRIX_TE220 = "docs/results/h200-matrix-cceeca7"
#: The declared matrix, every stack at one commit.
_MATRIX = "docs/results/h200-matrix-4a18837"
#: The combinations users train with (checkpoint resume, new input shapes, a linear called twice, block scaling) on
#: thunder 0.2.2 .. 0.2.7.dev20260201 with TE 2.9.0.
_COMBINATIONS_RUN_TE29 = "docs/results/h200-te2.9.0-13aaff2-combinations"
#: The same rows with TE 2.20.2, after the fixes that run led to.
_COMBINATIONS_RUN_TE220 = "docs/results/h200-te2.20.2-640b276-combinations"
#: The strategies' first rows (torch DDP and FSDP2 around thunderfx, FSDP + activation checkpointing) on thunder 0.2.2 ..
#: 0.2.7.dev20260201 with TE 2.9.0, before their failures were registered.
_STRATEGIES_RUN_TE29 = "docs/results/h200-te2.9.0-8cf5409-strategies"

REGISTRY: tuple[KnownDefect, ...] = (
    KnownDefect(
        id="legacy-executor-loses-te-from-te-2.10",
        summary="thunder 0.2.6's legacy TE executor claims no linear with TE 2.10+: a silent fallback to torch",
        executors=("legacy",),
        signature=signatures.LEGACY_MODULE_LOST_TE,
        checks=checks.TE_RUNS,
        thunder=">=0.2.0.dev0,<0.2.7",
        te=">=2.10",
        cause="thunder/executors/transformer_engine_v1ex.py (transformer_engineex.py before 0.2.6.dev20250928) imports "
        "CPUOffloadEnabled from transformer_engine.pytorch.cpu_offload in try/except; TE 2.10 removed it, so TE_AVAILABLE = "
        "False and the checker declines every linear. Read in every build 0.2.0.dev20240404 .. 0.2.7.dev20251109 "
        "(docs/results/wheels-legacy-cpu-offload-import): nothing to bisect. Run with TE 2.12-2.20 on 0.2.5, 0.2.6.dev20251019, "
        "0.2.6. Removed in 0.2.7.dev20251130 (PR #2762): no fix expected",
        model=models.TORCH_RUNS_EVERY_LINEAR,
        seen=(_MATRIX_RUN, "docs/results/h200-te2.12.0-89202c6", "docs/results/h200-x2-te2.12.0-9e2f3e1",
              "docs/results/h200-x2-te2.16.1-9e2f3e1", "docs/results/h200-x2-te2.20.2-07a1392",
              _TE220_THUNDER025_RUN),
    ),
    KnownDefect(
        id="functional-executor-loses-te-from-te-2.10",
        summary="the functional TE executor of thunder 0.2.3 .. 0.2.5.dev20250824 claims no linear with TE 2.10+: it "
        "asks the legacy executor's checker, which declines every linear there",
        executors=("functional",),
        signature=signatures.LEGACY_CHECKER_LOST_TE,
        checks=checks.TE_RUNS,
        thunder=">=0.2.3,<=0.2.5.dev20250824",
        te=">=2.10",
        cause="thunder/executors/transformer_engine_v2ex_impl.py imports _linear_checker from the legacy "
        "transformer_engineex.py, which returns False unless its TE_AVAILABLE, lost with TE 2.10+ "
        "(legacy-executor-loses-te-from-te-2.10). Read in every build 0.2.3 .. 0.2.5.dev20250824, gone from 0.2.5.dev20250831 "
        "(docs/results/wheels-functional-borrows-legacy-checker). Run with TE 2.20.2 on 0.2.3, 0.2.4, 0.2.5.dev20250803; 0.2.5 "
        "and 0.2.6.dev20251019 claimed every linear",
        model=models.TORCH_RUNS_EVERY_LINEAR,
        seen=(_TE220_OLDER_BUILDS_RUN, _TE220_THUNDER025_RUN),
    ),
    KnownDefect(
        id="grad-accumulation-fp8-state-per-cache-entry",
        summary="under skip_data_parallel_grad_sync each thunder cache entry keeps its own TE FP8 state, "
        "so the synced micro-batch does not see the amaxes of the ones before it",
        executors=("legacy", "functional"),
        signature=signatures.FP8_STATE_PER_CACHE_ENTRY,
        checks=(checks.DDP_GRAD_ACCUMULATION, checks.DDP_LLAMA_GRAD_ACCUMULATION, checks.FSDP_GRAD_ACCUMULATION),
        thunder=">=0.2.0.dev20240609,<0.2.8",
        te=">=1.6,<2.21",
        cause="thunder/__init__.py keys the cache on get_skip_data_parallel_grad_sync() (cache_info['no_grad_sync']), so the "
        "no-sync micro-batch gets its own cache entry and TE state (legacy: new TELinears, transformer_engine_v1ex.py; "
        "functional: new get_te_fp8_state states, transformer_engineex_impl.py); eager TE's micro-batches share one fp8_meta. "
        "Run on 0.2.6 and 0.2.7 dev builds with TE 2.9-2.20; read, not run, from 0.2.0.dev20240609 (TE 1.6+) on",
        model=models.STATE_PER_ENTRY,
        seen=(_MATRIX_RUN, "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-te2.12.0-89202c6"),
    ),
    KnownDefect(
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
              _MATRIX_TE220, "docs/results/cpu-bisect-fsdp-nosync-2024"),
    ),
    KnownDefect(
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
        seen=(_TE18_RUN_B4F3E73, _MATRIX),
    ),
    KnownDefect(
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
        "update's shape (scripts/fsdp_probe.py, PROBE_FAKE_TE=v2tokens PROBE_BATCH=16: docs/results/cpu-fsdp-probe): "
        "1.weight parts, the rest is exact. Run on 0.2.3 with TE 2.9.0; from 0.2.4.dev20250608 the stash is skipped "
        "(fsdp-no-sync-loses-accumulated-gradients); from TE 2.10 the functional executor claims no linear "
        "(functional-executor-loses-te-from-te-2.10)",
        model=models.INPUT_GRAD_STASHED,
        seen=("docs/results/h200-matrix-16708bb",),
    ),
    KnownDefect(
        id="functional-fp32-bias-in-fp8-gemm",
        summary="thunder's functional TE executor passes an fp32 bias into TE's FP8 GEMM, which cuBLASLt rejects",
        executors=("functional",),
        signature=signatures.FP32_BIAS_GEMM,
        checks=(checks.NUMERICS_FP32_BIAS,),
        thunder=">=0.2.3,<0.2.8",
        te=">=2.9,<2.21",
        cause="thunder/executors/transformer_engineex_impl.py _linear_fwd_impl calls BasicLinear._functional_forward(bias=bias, "
        "with_quantized_compute=True) with the fp32 bias, which general_gemm fuses into the FP8 GEMM; cuBLASLt has no such "
        "GEMM. Eager te.Linear casts the bias to bf16 for FP8 GEMMs (module/linear.py _Linear.forward); te.ops does not fuse an "
        "fp32 bias",
        seen=(_MATRIX_RUN, "docs/results/h200-x2-te2.9.0-e797194", "docs/results/h200-te2.9.0-89202c6",
              "docs/results/h200-te2.12.0-89202c6", _FEATURES_RUN_TE29, _VERSIONS_RUN_TE29),
    ),
    KnownDefect(
        id="legacy-fp8-group-ignored",
        summary="thunder's legacy TE executor wraps its forward in fp8_autocast without the caller's fp8_group: "
        "amaxes are reduced over the world",
        executors=("legacy",),
        signature=signatures.AUTOCAST_WITHOUT_GROUP,
        checks=checks.FP8_GROUPS,
        thunder=">=0.2.0.dev0,<0.2.7",
        te=">=1.6,<2.21",
        cause="thunder/executors/transformer_engine_v1ex.py TE_CTX_STR: fp8_autocast(fp8_recipe=...) with no fp8_group. Run "
        "with TE 2.9-2.20; TE 1.6-1.8 read, not run: the same TE_CTX_STR (transformer_engineex.py before 0.2.6) is in every "
        "build 0.2.0.dev20240609 .. 0.2.6",
        model=models.WORLD_REDUCTION,
        seen=(_MATRIX_RUN, "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-x2-te2.9.0-e797194",
              "docs/results/h200-x4-te2.9.0-dcd92ab"),
    ),
    KnownDefect(
        id="functional-fp8-group-ignored",
        summary="thunder's functional TE executor all-reduces amax histories over the default process group, "
        "ignoring fp8_autocast's group",
        executors=("functional",),
        signature=signatures.UPDATE_WITHOUT_GROUP,
        checks=checks.FP8_GROUPS,
        thunder=">=0.2.5.dev20250824,<0.2.8",
        te=">=2.9,<2.21",
        cause="thunder/executors/transformer_engineex_impl.py _te_fp8_amax_and_scale_update_impl all-reduces state.amax_history "
        "over _get_default_group() (thunder PR #2404). GPU bisect, TE 2.9.0: 0.2.5.dev20250824 is the first build with it; "
        "before it amaxes were not reduced at all (functional-amax-not-reduced-across-ranks)",
        model=models.WORLD_REDUCTION,
        seen=(_MATRIX_RUN, "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-te2.12.0-89202c6",
              "docs/results/h200-x2-te2.9.0-e797194", "docs/results/h200-x4-te2.9.0-dcd92ab",
              _CLEAN_RELEASES_RUN_TE29),
        bounds=(BisectedBound("thunder", ">=0.2.5.dev20250824", f"{_RANGE_BISECTS_TE29}/group-from/bisect.json"),),
    ),
    KnownDefect(
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
    ),
    KnownDefect(
        id="legacy-executor-miscounts-te-2.9-saved-tensors",
        summary="thunder 0.2.2's and 0.2.3's legacy TE executor cannot unpack what TE 2.9's _Linear forward "
        "saves: every TE linear raises ValueError in the computation trace",
        executors=("legacy",),
        signature=signatures.LEGACY_UNPACK_AT_TE_LINEAR,
        checks=checks.TE_RUNS + checks.LEGACY_SYNC,
        thunder=">=0.2.2.dev0,<=0.2.4.dev20250622",
        te=_SEEN_TE29,
        cause="read in the wheels: the trace unpacks te_linear_N's result into as many saved tensors as its meta names (5 in "
        "0.2.2; 8 in 0.2.3, via _get_num_saved_tensors), but TE 2.9.0's _Linear.forward saves 6, so the unpack raises. Run with "
        "TE 2.9.0 only. GPU bisects: fixed in 0.2.4 (input_quantizer.internal = True there, not shown to be the fix); starts at "
        "0.2.2.dev0, 0.2.1 failing otherwise (docs/results/h200-te2.9.0-04f6fc3-bisects/miscount-from)",
        seen=(_VERSIONS_RUN_TE29, _RELEASES_RUN_TE29, _RELEASES_WEEKLIES_RUN_TE29, _CLEAN_RELEASES_RUN_TE29),
        bounds=(BisectedBound("thunder", "<=0.2.4.dev20250622", f"{_ENTRY_BISECTS_TE29}/miscount-fix/bisect.json"),),
    ),
    KnownDefect(
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
        seen=(_FSDP_LAYER_BISECT, _VERSIONS_RUN_TE29, _RELEASES_RUN_TE29, _MATRIX_TE220, _TE18_RUN_B4F3E73),
        bounds=(BisectedBound("thunder", "<0.2.4.dev20250608", f"{_FSDP_LAYER_BISECT}/fix/bisect.json"),),
    ),
    KnownDefect(
        id="legacy-backward-sync-dropped-by-delayed-split",
        summary="the legacy TE executor's backward FP8 sync is missing from the backward trace and never runs: "
        "thunder's new default trace split bypasses the function that inserts it",
        executors=("legacy",),
        signature=signatures.NO_BACKWARD_SYNC_AT_ALL,
        checks=(checks.BWD_SYNC_PLACEMENT, checks.BWD_SYNC_RUNS_ONCE),
        thunder=">=0.2.4.dev20250608,<=0.2.4.dev20250622",
        te=">=1.6",
        without_te=True,
        cause="read in the wheels: 0.2.4.dev20250608 defaults delay_trace_split to True (thunder/__init__.py, "
        "thunder/transforms/autodiff.py), skipping torch_autograd.split_forward_backward, the only caller of "
        "transformer_engineex._transformer_engine_bwd_fp8_meta_sync; 0.2.4 calls transformer_engine_v1_bwd_fp8_meta_sync from "
        "autodiff.py. Run on the CPU only (teparity's recorder counts the sync); on a GPU with TE, inferred from the source",
        seen=(_SYNC_SPLIT_BISECT, _CPU_BUILDS_RUN),
        bounds=(BisectedBound("thunder", ">=0.2.4.dev20250608", f"{_SYNC_SPLIT_BISECT}/introduced/bisect.json"),
                BisectedBound("thunder", "<=0.2.4.dev20250622", f"{_SYNC_SPLIT_BISECT}/fix/bisect.json")),
    ),
    KnownDefect(
        id="no-grad-forward-left-to-torch",
        summary="under torch.no_grad neither TE executor claims a linear: thunder runs the inference forward in torch",
        executors=("legacy", "functional"),
        signature=signatures.NO_GRAD_LEFT_TO_TORCH,
        checks=(checks.INFERENCE,),
        thunder=">=0.2.0.dev20241124,<0.2.8",
        te=">=1.6,<2.21",
        cause="both executors register TE for prims.linear only (transformer_engineex_impl.py, transformer_engine_v1ex.py); "
        "from 0.2.0.dev20241124 a no-grad trace keeps ltorch.linear, which the torch executor claims whole. Up to dev20241117 "
        "TE held it (CPU stand-in executor: docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd; TE 1.8.0 on dev20240728, "
        "dev20240901 passed). Run on 0.2.2 .. 0.2.6 with TE 2.9.0, 0.2.6 and 0.2.7.dev20260201 with TE 2.20.2",
        model=models.TORCH_RUNS_EVERY_LINEAR,
        seen=(_FEATURES_RUN, _TE18_RUN),
    ),
    KnownDefect(
        id="functional-declines-current-scaling",
        summary="thunder's functional TE executor declines every linear under Float8CurrentScaling and "
        "Float8BlockScaling (with a warning): thunder runs them in torch where eager TE runs them in FP8",
        executors=("functional",),
        signature=signatures.CURRENT_SCALING_LEFT_TO_TORCH,
        checks=("numerics[current]", "numerics[blockwise]"),
        thunder=">=0.2.6.dev20251005,<0.2.8",
        te=">=2.2,<2.21",
        cause="thunder/executors/transformer_engineex_impl.py _linear_checker accepts DelayedScaling, MXFP8BlockScaling and "
        "NVFP4BlockScaling only; for another recipe it warns '... TE wont be used' and returns False, so torch takes the "
        "linear. Read in the wheels: the warning from 0.2.6.dev20251005 on; up to dev20250928 the checker asserts instead "
        "(functional-checker-asserts-on-current-scaling)",
        model=models.TORCH_RUNS_EVERY_LINEAR,
        seen=("docs/results/h200-te2.9.0-72fa083", "docs/results/h200-te2.20.2-72fa083", "docs/results/h200-te2.20.2-0901221", _COMBINATIONS_RUN_TE220),
    ),
    KnownDefect(
        id="functional-checker-asserts-on-current-scaling",
        summary="thunder's functional TE executor of 0.2.5.dev20250831 .. 0.2.6.dev20250928 raises AssertionError while "
        "checking a linear under Float8CurrentScaling or Float8BlockScaling: every program with a linear fails to trace",
        executors=("functional",),
        signature=signatures.CHECKER_ASSERTS_THE_RECIPE,
        checks=("numerics[current]", "numerics[blockwise]"),
        thunder=">=0.2.5.dev20250831,<=0.2.6.dev20250928",
        te=">=2.2,<2.21",
        cause="thunder/executors/transformer_engine_v2ex_impl.py (transformer_engineex_impl.py from 0.2.6.dev20250914) "
        "_linear_checker's check_valid_fp8_shapes: 'if fp8_recipe.delayed(): ...; assert fp8_recipe.mxfp8()', so any other "
        "recipe raises instead of declining. Read in the wheels 0.2.5.dev20250831 .. 0.2.6.dev20250928 (line 279); "
        "0.2.6.dev20251005 declines with a warning (functional-declines-current-scaling); before dev20250831 the legacy "
        "checker decides. Run on 0.2.5 with TE 2.20.2",
        seen=(_MATRIX_TE220, _COMBINATIONS_RUN_TE29),
    ),
    KnownDefect(
        id="checkpoint-drops-fp8-state",
        summary="thunder's state_dict holds no TE FP8 state: a run resumed from it (compiled again, or in eager TE) "
        "starts a fresh one, where eager TE resumes its own from _extra_state",
        executors=("legacy", "functional"),
        signature=signatures.STATE_RESTARTS_AT_RESUME,
        checks=(checks.CHECKPOINT_RESUME,),
        thunder=">=0.2.0.dev20240728,<0.2.8",
        te=">=1.6,<2.21",
        cause="thunder/core/module.py ThunderModule.state_dict returns the original module's parameters and buffers (and "
        "ThunderModule's own extra state, which it has none of); the TE FP8 state lives in the compiled traces (legacy: "
        "the TELinear modules of transformer_engine_v1ex.py; functional: get_te_fp8_state's TERecipeState, "
        "transformer_engineex_impl.py), so nothing saves it, and a new compilation starts its own. Eager te.Linear saves "
        "it as _extra_state (module/base.py get_extra_state). thunder issue #2622 asks for it",
        model=models.FRESH_STATE_AT_RESUME,
        seen=(_COMBINATIONS_RUN_TE29,),
    ),
    KnownDefect(
        id="fp8-state-per-input-shape",
        summary="thunder compiles a cache entry per input shape, each with its own TE FP8 state: a step of a new shape "
        "starts a fresh one, where eager TE keeps one state per module",
        executors=("legacy", "functional"),
        signature=signatures.STATE_PER_INPUT_SHAPE,
        checks=("new-input-shape[sequence-length-default]", "new-input-shape[short-last-batch-default]"),
        thunder=">=0.2.0.dev20240728,<0.2.8",
        te=">=1.6,<2.21",
        cause="thunder's default cache (CACHE_OPTIONS.CONSTANT_VALUES) keys an entry on the input's shape; each entry's "
        "execution trace has its own TE state (legacy: new TELinears, transformer_engine_v1ex.py; functional: new "
        "get_te_fp8_state states, a stateful operator per bound symbol, transformer_engineex_impl.py); eager te.Linear "
        "keeps one fp8_meta whatever the shape. The defect of grad-accumulation-fp8-state-per-cache-entry, with the "
        "shape as the key",
        model=models.STATE_PER_ENTRY,
        seen=(_COMBINATIONS_RUN_TE29, _COMBINATIONS_RUN_TE220),
    ),
    KnownDefect(
        id="fp8-state-per-linear-call",
        summary="thunder's TE executors keep an FP8 state per call of a linear: a linear called twice in a forward has "
        "two, where eager TE's module keeps one for both calls",
        executors=("legacy", "functional"),
        signature=signatures.STATE_PER_CALL,
        checks=(checks.LINEAR_CALLED_TWICE,),
        thunder=">=0.2.0.dev20240728,<0.2.8",
        te=">=1.6,<2.21",
        cause="each linear of the trace is a TE linear of its own with its own state (legacy: a TELinear per te_linear_N "
        "symbol, transformer_engine_v1ex.py; functional: get_te_fp8_state is a stateful operator, a TERecipeState per "
        "bound symbol, extend/__init__.py register_stateful_operator); eager te.Linear records both calls' amaxes in "
        "its one fp8_meta",
        model=models.STATE_PER_LINEAR_CALL,
        seen=(_COMBINATIONS_RUN_TE29, _COMBINATIONS_RUN_TE220),
    ),
    KnownDefect(
        id="functional-block-scaling-quantizer-count",
        summary="thunder's functional TE executor of 0.2.3 .. 0.2.5.dev20250824 asks a Float8BlockScaling recipe state "
        "for 2 forward quantizers, and TE asserts on the count: every program with a linear fails",
        executors=("functional",),
        signature=signatures.BLOCK_SCALING_QUANTIZER_COUNT,
        checks=("numerics[blockwise]",),
        thunder=">=0.2.3,<0.2.5.dev20250831",
        te=">=2.9,<2.21",
        cause="transformer_engine_v2ex_impl.py _te_linear_execution_transform calls get_te_fp8_state(recipe, 'forward', 2) "
        "(input and weight), and TE's Float8BlockScalingRecipeState.make_quantizers asserts num_quantizers % 3 == 0 (input, "
        "weight, output per GEMM: quantization.py). The checker of those builds (the legacy executor's) reads no recipe and "
        "accepts the linear. From 0.2.5.dev20250831 the functional checker asserts on the recipe first "
        "(functional-checker-asserts-on-current-scaling), from 0.2.6.dev20251005 it declines it "
        "(functional-declines-current-scaling)",
        seen=(_COMBINATIONS_RUN_TE29,),
    ),
    KnownDefect(
        id="symbolic-values-cannot-unpack-module-parameters",
        summary="thunder.jit(cache='symbolic values') of a module raises NotImplementedError on its first call: the "
        "interpreter cannot unpack a parameter's shape from its provenance",
        executors=("legacy", "functional"),
        signature=signatures.SYMBOLIC_VALUES_CANNOT_UNPACK,
        checks=("new-input-shape[sequence-length-symbolic-values]", "new-input-shape[short-last-batch-symbolic-values]"),
        thunder=">=0.2.1,<0.2.7.dev20251123",
        te=">=1.6,<2.21",
        without_te=True,
        cause="thunder/core/proxies.py tensorproxy() gives every tensor symbolic shapes under CACHE_OPTIONS.SYMBOLIC_VALUES, "
        "a torch.nn.Parameter's too, and unpacking `_modules['0']._parameters['weight'].shape[0]` from its provenance "
        "raises. 0.2.7.dev20251123 keeps a parameter's shape static (read in the wheels). Without TE on the CPU: every "
        "release 0.2.1 .. 0.2.6 and weekly build up to 0.2.7.dev20251116 raises, dev20251123 and dev20251130 work "
        "(docs/results/cpu-bisect-symbolic-values); where it works one cache entry serves every shape, and the TE FP8 "
        "state follows eager TE's",
        seen=(_COMBINATIONS_RUN_TE29, _COMBINATIONS_RUN_TE220, "docs/results/cpu-bisect-symbolic-values"),
    ),
    KnownDefect(
        id="functional-new-recipe-object-resets-fp8-state",
        summary="thunder's functional TE executor starts a new FP8 state whenever the recipe object changes, where "
        "eager TE keeps each module's state across DelayedScaling recipes",
        executors=("functional",),
        signature=signatures.STATE_RESTARTS_EACH_STEP,
        checks=(checks.RECIPE_CHANGE,),
        thunder=">=0.2.3,<0.2.8",
        te=">=2.9,<2.21",
        cause="thunder/executors/transformer_engineex_impl.py TERecipeState.__call__ keeps its state only while "
        "`self.parent_recipe is recipe`, else makes a new RecipeState (transformer_engine_v2ex_impl.py in 0.2.3-0.2.5 too); "
        "eager TE (module/base.py init_fp8_metadata, set_meta_tensor) keeps the state across DelayedScaling recipes, adjusting "
        "the amax history length. An inline te.autocast(recipe=DelayedScaling()) never accumulates an amax history",
        model=models.FRESH_STATE_PER_RECIPE,
        seen=(_FEATURES_RUN,),
    ),
    KnownDefect(
        id="autocast-quantizes-bf16-copies",
        summary="under torch.autocast thunder casts the fp32 input and weight to bfloat16 before TE quantizes them, "
        "where eager TE quantizes the fp32 tensors: the FP8 values differ by double rounding",
        executors=("legacy", "functional"),
        signature=signatures.BF16_COPIES_QUANTIZED,
        checks=(checks.TORCH_AUTOCAST,),
        thunder=">=0.2.0.dev20240728,<0.2.8",
        te=">=1.8,<2.21",
        cause="thunder/transforms/autocast.py _linear_autocast_impl downcasts input and weight (maybe_downcast_to) before "
        "prims.linear; eager te.Linear (module/linear.py _Linear.forward) quantizes the fp32 tensors. Double rounding near E4M3 "
        "midpoints, carried by E5M2 gradients, exceeds TE's tolerances from step 0. Run on 0.2.3 .. 0.2.7 dev builds with TE "
        "2.9-2.20 and on 0.2.0.dev20240728, dev20240901 with TE 1.8.0 (legacy); builds between read, not run",
        model=models.QUANTIZED_BF16_COPIES,
        seen=(_FEATURES_RUN, _FEATURES_RUN_TE29, _VERSIONS_RUN_TE29, _RELEASES_RUN_TE29, _TE18_RUN),
    ),
    KnownDefect(
        id="legacy-checkpointing-records-amax-twice",
        summary="with the legacy TE executor, a linear under activation checkpointing records its amaxes again when "
        "the backward recomputes it, after the step's update: its FP8 state and gradients part from eager TE's",
        executors=("legacy",),
        signature=signatures.RECOMPUTE_RECORDS_AMAX_AGAIN,
        checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
        thunder=">=0.2.4,<0.2.7",
        te=">=2.9,<2.10",
        cause="seen, not read in source: the legacy te_linear_N (a TELinear, transformer_engine_v1ex.py) records amaxes in its "
        "fp8_meta; thunder's checkpointing reruns it in the backward after the step's amax update, refilling the cleared slot: "
        "gradients part from step 0 (the functional executor's own transform avoids it). Under thunder fsdp the refilled slot "
        "is each rank's own amax, reduced by no one until the next forward: the ranks' pending rows part. Run on 0.2.4 .. 0.2.6 "
        "with TE 2.9.0; a GPU bisect found 0.2.3 .. 0.2.4.dev20250622 raising legacy-executor-miscounts-te-2.9-saved-tensors first",
        model=models.RECOMPUTE_RECORDS_AMAXES,
        seen=(_FEATURES_RUN_TE29, _FEATURES_RUN_TE29_82BFE86, _VERSIONS_RUN_TE29,
              f"{_ENTRY_BISECTS_TE29}/ckpt-twice-from", _STRATEGIES_RUN_TE29),
    ),
    KnownDefect(
        id="functional-amax-not-reduced-across-ranks",
        summary="before thunder 0.2.5.dev20250824 the functional TE executor does not all-reduce amaxes across data-parallel "
        "ranks: each rank's FP8 scales follow its own data",
        executors=("functional",),
        signature=signatures.RANKS_PART_UNREDUCED,
        checks=(checks.DDP, checks.DDP_FIRST_STEP, checks.DDP_LLAMA, checks.DDP_GRAD_ACCUMULATION, checks.DDP_LLAMA_GRAD_ACCUMULATION,
                checks.FSDP, checks.FSDP_LLAMA, checks.FSDP_GRAD_ACCUMULATION, checks.DDP_THUNDERFX, checks.FSDP2_THUNDERFX,
                checks.FSDP_ACTIVATION_CHECKPOINTING),
        thunder=">=0.2.3,<=0.2.5.dev20250817",
        te=_SEEN_TE29,
        cause="transformer_engine_v2ex_impl.py (0.2.3, 0.2.4) updates each recipe state from its own amax history, where eager "
        "TE reduces over the fp8_autocast group; thunder PR #2404 added the all-reduce (teparity's mutant "
        "functional-no-cross-rank-reduction removes it). Run on 0.2.3 .. 0.2.5.dev20250817 with TE 2.9.0; a GPU bisect finds "
        "0.2.5.dev20250824 clean, where functional-fp8-group-ignored starts. Every multi-rank FP8 check meets it: the ddp and "
        "fsdp tiers' on 0.2.3 and 0.2.4 with TE 2.9.0 (docs/results/h200-matrix-4a18837), torch DDP around thunderfx's too "
        "(docs/results/h200-te2.9.0-8cf5409-strategies)",
        model=models.NO_REDUCTION,
        seen=(_VERSIONS_RUN_TE29, _FEATURES_RUN_TE29_82BFE86, _RELEASES_WEEKLIES_RUN_TE29,
              _FIX_BISECTS_TE29, _CLEAN_RELEASES_RUN_TE29, _MATRIX, _STRATEGIES_RUN_TE29),
        bounds=(BisectedBound("thunder", "<=0.2.5.dev20250817", f"{_RANGE_BISECTS_TE29}/unreduced-fix/bisect.json"),),
    ),
    KnownDefect(
        id="functional-checkpointing-saves-te-linears",
        summary="up to thunder 0.2.5.dev20250629 thunder.jit under activation checkpointing recomputes none of the functional "
        "executor's TE linears: the checkpointed region keeps its activations",
        executors=("functional",),
        signature=signatures.CHECKPOINTED_LINEARS_NOT_RECOMPUTED,
        checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
        thunder=">=0.2.3,<=0.2.5.dev20250629",
        te=_SEEN_TE29,
        cause="seen, not read in source: on 0.2.3 .. 0.2.5.dev20250629 (TE 2.9.0) a checkpointed region's backward has no "
        "te_functional_linear_fwd: its TE linears are saved. dev20250706 .. dev20250803 show "
        "functional-checkpointing-updates-fp8-state-twice; dev20250810 ships the fix "
        "(docs/results/wheels-functional-checkpointing-transform). The fix bisect was cut off, hidden by that defect "
        "(docs/results/h200-te2.9.0-04f6fc3-bisects/ckpt-saves-fix); dev20250629 was a near miss in "
        "docs/results/h200-te2.9.0-04f6fc3-bisects/twice-from. Under thunder fsdp the same (0.2.3, 0.2.4)",
        model=models.SAVED_NOT_RECOMPUTED,
        seen=(_VERSIONS_RUN_TE29, _FEATURES_RUN_TE29_82BFE86, _CLEAN_RELEASES_RUN_TE29, _STRATEGIES_RUN_TE29),
    ),
    KnownDefect(
        id="functional-thunderfx-checkpointing-backward-unbound",
        summary="up to thunder 0.2.5.dev20250629 a checkpointed region compiled with thunderfx fails in its backward: the "
        "backward reads a forward tensor (a TE linear's output, an activation's input) that it never computes",
        executors=("functional",),
        signature=signatures.RECOMPUTE_READS_AN_UNBOUND_FORWARD_TENSOR,
        checks=(checks.ACTIVATION_CHECKPOINTING, checks.FSDP_ACTIVATION_CHECKPOINTING),
        thunder=">=0.2.3,<=0.2.5.dev20250629",
        te=_SEEN_TE29,
        cause="seen, not read in source: thunder.backward_fn passes te_functional_linear_bwd a forward tensor (t29 on 0.2.3) "
        "that the backward never defines, or, with a GELU between linears, an unrecomputed activation input; no checkpointing "
        "transform before dev20250810 (docs/results/wheels-functional-checkpointing-transform). The fix bisect was cut off "
        "(docs/results/h200-te2.9.0-04f6fc3-bisects/thunderfx-fix): dev20250810 clean, dev20250706 .. dev20250803 hidden by "
        "functional-checkpointing-updates-fp8-state-twice; 0.2.5.dev20250629 near-missed (docs/results/h200-te2.9.0-db1ecfc), "
        "ending the range. Under torch FSDP2 the same error, on gloo ranks sharing a GPU before FSDP2's crash there (0.2.3, 0.2.4)",
        seen=(_VERSIONS_RUN_TE29, _FEATURES_RUN_TE29_82BFE86, _RELEASES_RUN_TE29,
              _CLEAN_RELEASES_RUN_TE29, _WEEKLIES_RUN_TE29, _STRATEGIES_RUN_TE29),
    ),
    KnownDefect(
        id="functional-jit-checkpointing-backward-unbound",
        summary="up to thunder 0.2.5.dev20250629, thunder.jit under activation checkpointing fails in the backward of a "
        "checkpointed region with a GELU after a functional-executor TE linear: the GELU's backward reads its forward "
        "input, the TE linear's output, which the backward neither receives nor recomputes",
        executors=("functional",),
        signature=signatures.CHECKPOINTED_GELU_READS_AN_UNBOUND_INPUT,
        checks=(checks.ACTIVATION_CHECKPOINTING,),
        thunder=">=0.2.3,<=0.2.5.dev20250629",
        te=_SEEN_TE29,
        cause="seen, not read in source: on 0.2.3 and 0.2.4 (TE 2.9.0) the backward of the case with GELUs raises "
        "UnboundLocalError on `torch.mul(t74, ...)`, t74 (f32[2, 8, 32]) the second TE linear's output, while the "
        "linears-only case trains and matches eager TE with its TE linears saved (docs/results/h200-matrix-4a18837): the consequence of "
        "functional-checkpointing-saves-te-linears wherever the region recomputes a GELU, so its range is that entry's. "
        "thunderfx fails earlier, at te_functional_linear_bwd (functional-thunderfx-checkpointing-backward-unbound)",
        seen=(_MATRIX,),
    ),
    KnownDefect(
        id="functional-checkpointing-updates-fp8-state-twice",
        summary="on the weekly builds 0.2.5.dev20250706 .. 0.2.5.dev20250803, under activation checkpointing, the backward's recomputation "
        "updates a forward FP8 state the forward already updated that step",
        executors=("functional",),
        signature=signatures.RECOMPUTE_UPDATES_THE_FORWARD_STATE_AGAIN,
        checks=(checks.ACTIVATION_CHECKPOINTING,),
        thunder=">=0.2.5.dev20250706,<=0.2.5.dev20250803",
        te=_SEEN_TE29,
        cause="seen, not read in source: a checkpointed region's backward runs te_fp8_amax_and_scale_update on states the "
        "forward updated that step; thunder.jit and thunderfx, both recipes. _te_activation_checkpointing_transform fixes it in "
        "0.2.5.dev20250810 (docs/results/wheels-functional-checkpointing-transform; GPU bisect clean). First bad: "
        "0.2.5.dev20250706 (TE 2.9.0, docs/results/h200-te2.9.0-04f6fc3-bisects/twice-from); dev20250629 recomputes no TE "
        "linear (functional-checkpointing-saves-te-linears), so that log has no boundary",
        seen=(_RELEASES_WEEKLIES_RUN_TE29, _FIX_BISECTS_TE29, _CLEAN_RELEASES_RUN_TE29),
        bounds=(BisectedBound("thunder", "<=0.2.5.dev20250803", f"{_FIX_BISECTS_TE29}/twice-last.json"),),
    ),
    KnownDefect(
        id="thunder-sdpa-params-predate-torch-2.5",
        summary="a thunder/torch pairing: thunder builds up to 0.2.0.dev20240728 call torch's _SDPAParams with the 6 "
        "arguments of torch 2.4, which torch 2.5+ refuses: every program with scaled-dot-product attention fails to trace "
        "on a CUDA device",
        executors=("legacy", "functional"),
        signature=signatures.SDPA_PARAMS_OF_SIX,
        checks=checks.LLAMA_RUNS,
        thunder=">=0.2.0.dev20240404,<0.2.0.dev20240804",
        te=">=1.6",
        torch=">=2.5",
        cause="thunder/executors/sdpaex.py's checker builds SDPAParams with torch 2.4's 6 arguments; torch 2.5 added "
        "enable_gqa, passed from 0.2.0.dev20240804. Not a TE defect: a build older than its torch (TE 1.6-1.8 hosts have torch "
        "2.4). Read in dev20240404 .. dev20240728; on the CPU with CUDA proxies torch 2.11 raises, 2.4.1 does not "
        "(docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd); run on the GPU with TE 1.8.0",
        seen=(_TE18_RUN, _TE18_RUN_B4F3E73),
    ),
    KnownDefect(
        id="thunder-torchcompile-cat-segfault-on-llama",
        summary="thunder 0.2.0.dev20240901 dies of SIGSEGV while it fuses the llama block for its torchcompile_cat "
        "executor, on a CUDA device",
        executors=("legacy", "functional"),
        signature=signatures.TORCHCOMPILE_CAT_SEGFAULT,
        checks=checks.LLAMA_RUNS,
        thunder=">=0.2.0.dev20240818,<=0.2.0.dev20240901",
        te=">=1.8,<1.9",
        cause="seen, not understood: the stack ends in thunder/core/transform_common.py order_proxies (optree.tree_iter) under "
        "executors/torch_compile.py fusion_pass. torchcompile_cat is a default executor from dev20240818 (thunder/__init__.py "
        "add_default_executor; CUDA only by its cuda_device_checker; read in the wheels: not in dev20240728 .. dev20240811, "
        "gone in 0.2.3). Run on the H200 (Python 3.12.3, torch 2.11.0, TE 1.8.0) on dev20240818 and dev20240901, every llama "
        "check; on the CPU the same function did not crash (Python 3.11/3.12, torch 2.4.1/2.11, optree 0.12-0.20: "
        "docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd). The range is the builds seen: on 0.2.2 with TE 2.20.2 the "
        "legacy executor claims no linear and the same pass does not crash",
        seen=(_TE18_RUN, _TE18_RUN_B4F3E73),
    ),
    KnownDefect(
        id="thunder-jit-cannot-trace-checkpoint-before-2025",
        summary="thunder.jit before 0.2.0.dev20250112 cannot trace a torch.utils.checkpoint region: the thunder side "
        "raises while tracing",
        executors=("legacy", "functional"),
        signature=signatures.CHECKPOINT_NOT_TRACED,
        checks=(checks.ACTIVATION_CHECKPOINTING,),
        thunder=">=0.2.0.dev20240728,<0.2.0.dev20250112",
        te=">=1.6",
        without_te=True,  # a defect of thunder.jit alone: its reproduction runs on the CPU
        cause="thunder interprets torch's non-reentrant checkpoint: torch 2.11's tree_flatten annotation defeats it (the 'idx' "
        "error), torch 2.4-2.5's torch.empty(..., requires_grad=True) is unsupported; dev20241020 .. dev20250105 call the "
        "region uninterpreted via a lookaside (a TensorProxy reaches linear); dev20250112 matches eager. Run on the CPU without "
        "TE, dev20240728 .. dev20250112, dev20241027 .. dev20241124 read only "
        "(docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd), and with TE 1.8.0 on dev20240728, dev20240901",
        seen=(_TE18_RUN,),
    ),
)
