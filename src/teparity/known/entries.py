"""The known upstream defects, as data: each entry's checks and executors, thunder and TE ranges, signature
(``teparity.known.signatures``), upstream cause and the committed runs that showed it."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
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
        "CPUOffloadEnabled from transformer_engine.pytorch.cpu_offload inside try/except; TE 2.10 removed that name, "
        "so the module sets TE_AVAILABLE = False and its checker declines every linear. The same import is in every "
        "build read, the first on the index (0.2.0.dev20240404) to 0.2.7.dev20251109 (docs/results/"
        "wheels-legacy-cpu-offload-import), so there is no first bad thunder build to bisect; run with TE 2.12-2.20 "
        "on 0.2.5, 0.2.6.dev20251019 and 0.2.6. The legacy executor was removed in thunder 0.2.7.dev20251130 "
        "(PR #2762), so no fix is expected",
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
        cause="thunder/executors/transformer_engine_v2ex_impl.py imports _linear_checker from "
        "thunder/executors/transformer_engineex.py (the legacy executor), which returns False unless that module's "
        "TE_AVAILABLE; with TE 2.10+ its CPUOffloadEnabled import fails (legacy-executor-loses-te-from-te-2.10), so "
        "the functional executor declines every linear too. The import is in every build from 0.2.3 (the functional "
        "executor's first) to 0.2.5.dev20250824 and gone from 0.2.5.dev20250831 on, read in the wheels "
        "(docs/results/wheels-functional-borrows-legacy-checker); run with TE 2.20.2 on 0.2.3, 0.2.4 and "
        "0.2.5.dev20250803, where 0.2.5 and 0.2.6.dev20251019 claimed every linear",
        seen=(_TE220_OLDER_BUILDS_RUN, _TE220_THUNDER025_RUN),
    ),
    KnownDefect(
        id="grad-accumulation-fp8-state-per-cache-entry",
        summary="under skip_data_parallel_grad_sync each thunder cache entry keeps its own TE FP8 state, "
        "so the synced micro-batch does not see the amaxes of the ones before it",
        executors=("legacy", "functional"),
        signature=signatures.FP8_STATE_PER_CACHE_ENTRY,
        checks=(checks.DDP_GRAD_ACCUMULATION, checks.DDP_LLAMA_GRAD_ACCUMULATION),
        thunder=">=0.2.0.dev20240609,<0.2.8",
        te=">=1.6,<2.21",
        cause="thunder/__init__.py records get_skip_data_parallel_grad_sync() in the cache info "
        "(cache_info['no_grad_sync']), so the no-sync micro-batch compiles its own cache entry; each entry builds "
        "its own TE state (legacy: a new TELinear per linear, transformer_engine_v1ex.py; functional: new "
        "get_te_fp8_state recipe states, transformer_engineex_impl.py), where eager TE's micro-batches share "
        "one module's fp8_meta. Run on 0.2.6 and 0.2.7 dev builds with TE 2.9-2.20; below that the range is "
        "read, not run: the same cache_info['no_grad_sync'] and TELinear per cache entry are in every build "
        "from 0.2.0.dev20240609 (TE 1.6+ accepted) to 0.2.6",
        seen=(_MATRIX_RUN, "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-te2.12.0-89202c6"),
    ),
    KnownDefect(
        id="functional-fp32-bias-in-fp8-gemm",
        summary="thunder's functional TE executor passes an fp32 bias into TE's FP8 GEMM, which cuBLASLt rejects",
        executors=("functional",),
        signature=signatures.FP32_BIAS_GEMM,
        checks=(checks.NUMERICS_FP32_BIAS,),
        thunder=">=0.2.3,<0.2.8",
        te=">=2.9,<2.21",
        cause="thunder/executors/transformer_engineex_impl.py _linear_fwd_impl calls "
        "BasicLinear._functional_forward(bias=bias, dtype=w.dtype, with_quantized_compute=True) with the fp32 "
        "bias, which general_gemm fuses into the FP8 GEMM; cuBLASLt has no FP8 GEMM with an fp32 bias. Eager "
        "te.Linear casts the bias to bf16 for FP8 GEMMs (module/linear.py _Linear.forward: 'cuBLAS does not "
        "support FP8 GEMM with FP32 bias'); te.ops does not fuse an fp32 bias",
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
        cause="thunder/executors/transformer_engine_v1ex.py TE_CTX_STR: fp8_autocast(fp8_recipe=...) with no fp8_group. "
        "Run with TE 2.9-2.20; TE 1.6-1.8 is read, not run: the same TE_CTX_STR (transformer_engineex.py before "
        "0.2.6) is in every build from 0.2.0.dev20240609 to 0.2.6, and it passes no group whatever the TE",
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
        cause="thunder/executors/transformer_engineex_impl.py _te_fp8_amax_and_scale_update_impl all-reduces "
        "state.amax_history over _get_default_group() (since thunder PR #2404). A GPU bisect with TE 2.9.0: "
        "0.2.5.dev20250817 keeps the groups apart, 0.2.5.dev20250824 does not; before it the amaxes were not "
        "reduced across ranks at all (functional-amax-not-reduced-across-ranks, fixed in the same build)",
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
        cause="thunder/distributed/transforms/ddp.py optimize_allreduce_in_ddp_backward (called by "
        "torch_autograd.split_forward_backward, from mid-2024 by apply_bucketing_to_grad_allreduce) calls get_bsym_of_allreduce_of_grad on every "
        "tensor the backward trace returns, the input's gradient too; that one has no all-reduce behind it, so the "
        "walk up its producers' first arguments reaches the backward's C0/cotangents collection and check_type raises, "
        "before the bucket_size_in_mb <= 0 branch. Gone from 0.2.4.dev20250608, where thunder builds a joint "
        "forward-backward trace by default (thunder/__init__.py delay_trace_split=True, thunder PR #2102): the pass "
        "then buckets nothing (thunder's test_ddp_grad_bucketing became a strict xfail); the walk in ddp.py is "
        "unchanged through 0.2.6",
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
        cause="read in the wheels: the trace unpacks te_linear_N's result as (out, saved tensors, ctx) with as many "
        "saved tensors as its meta function names: a fixed tuple of 5 in 0.2.2; in 0.2.3 the count of an eager "
        "te.Linear(MIN_DIM, MIN_DIM) run once under the default recipe (_get_num_saved_tensors), 8 there. "
        "TELinear.forward returns what ctx.pop_saved_tensors() holds after the real _Linear.forward, another "
        "number with TE 2.9.0 (6 in 0.2.3's cases), so `(out, (t..), ctx) = te_linear_0(...)` raises. Both builds "
        "set input_quantizer.internal = False in TELinear._get_quantizers, which 0.2.4 changed to True, and 0.2.4's "
        "legacy executor runs on TE 2.9.0; that this change is the fix was not shown. Seen with TE 2.9.0 only. The legacy "
        "sync scenarios' ranks raise it too (bwd-sync-*, fwd-has-no-sync: seen at 363ddd5). A GPU bisect of the fix: "
        "0.2.4.dev20250608 .. 0.2.4.dev20250622 still show it, 0.2.4 does not (PEP 440 keeps 0.2.4's dev builds out of "
        "`<0.2.4`, hence the bound by build). Where it starts: the GPU bisect from 0.2.1 finds 0.2.2.dev0 (the first "
        "build after 0.2.1 on the index) bad and 0.2.1 hiding it behind another failure of its own (its thunder "
        "side raises otherwise: docs/results/h200-te2.9.0-04f6fc3-bisects/miscount-from), so the range starts at "
        "the first build that can show it",
        seen=(_VERSIONS_RUN_TE29, _RELEASES_RUN_TE29, _RELEASES_WEEKLIES_RUN_TE29, _CLEAN_RELEASES_RUN_TE29),
        bounds=(BisectedBound("thunder", "<=0.2.4.dev20250622", f"{_ENTRY_BISECTS_TE29}/miscount-fix/bisect.json"),),
    ),
    KnownDefect(
        id="fsdp-transform-layer-bucketing-rejects-input-grad",
        summary="thunder's FSDP transform with LAYER bucketing raises on an input that requires grad: its "
        "reduce-scatter bucketing looks for a parameter behind the input's gradient too",
        executors=(None, "legacy", "functional"),
        signature=signatures.NO_BUCKET_FOR_THE_INPUT_GRAD,
        checks=(checks.row(checks.FSDP_TRANSFORM, "zero2-layer"), checks.row(checks.FSDP_TRANSFORM, "zero3-layer"),
                checks.row(checks.FSDP, "zero2-layer"), checks.row(checks.FSDP, "zero3-layer")),
        thunder=">=0.2.0.dev20240404,<0.2.4.dev20250608",
        te=">=1.6",
        without_te=True,
        cause="thunder/distributed/transforms/fsdp.py create_map_from_unsharded_grad_to_bucket (called by "
        "split_forward_backward through apply_bucketing_to_backward_trace) checks that every tensor the backward "
        "trace returns is a bucketed parameter's gradient; the input's gradient, output 0, is none, so "
        "utils.check raises 'Invalid index=0'. Without bucketing (NONE) both shardings pass. Seen from the first "
        "build on the index, 0.2.0.dev20240404 (torch 2.4.1), to 0.2.4.dev20250601 (torch 2.11.0); gone from "
        "0.2.4.dev20250608, the build where thunder's DDP bucketing stopped raising on an input's gradient too "
        "(ddp-transform-rejects-input-grad): the CPU bisect found the boundary, the source of the fix was not read. "
        "The fsdp tier's LAYER variants meet the same check (read, not run: the transform raises before any TE linear "
        "runs, with or without a TE executor)",
        seen=(_FSDP_LAYER_BISECT, _VERSIONS_RUN_TE29, _RELEASES_RUN_TE29),
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
        cause="read in the wheels: 0.2.4.dev20250608 made thunder.jit's delay_trace_split default True "
        "(thunder/__init__.py: grad_transform_on_trace, then split_into_forward_and_backward in "
        "thunder/transforms/autodiff.py), so torch_autograd.split_forward_backward, the only caller of "
        "transformer_engineex._transformer_engine_bwd_fp8_meta_sync, no longer runs; 0.2.4 calls "
        "transformer_engine_v1_bwd_fp8_meta_sync from autodiff.py too (the next build on the index; the range ends at the last "
        "bad one, since PEP 440 orders 0.2.4's dev builds below 0.2.4). The same change ended "
        "ddp-transform-rejects-input-grad. Seen on the CPU (the sync counted by teparity's recorder); that a GPU "
        "run with TE shows it too follows from the code read, not from a run",
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
        cause="both executors register TE for prims.linear only (transformer_engineex_impl.py and transformer_engine_v1ex.py "
        "register_implementation(linear_prim / prims.linear, ...)); with grad enabled thunder's autodiff decomposes "
        "torch.nn.functional.linear to prims.linear and the grad transform takes it, but a no-grad trace keeps "
        "ltorch.linear, which the torch executor claims whole, so TE never sees the prim. That keeping starts in "
        "0.2.0.dev20241124, which records the grad mode at trace time and treats what no-grad traced as constant: up "
        "to dev20241117 thunder ignored torch.no_grad, the linear went to prims.linear and TE held it (a stand-in "
        "executor registered as TE's on the CPU, every weekly build: docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd; the gate with TE 1.8.0 on dev20240728 and "
        "dev20240901 passed these checks). Run on thunder 0.2.2 .. 0.2.6 with TE 2.9.0 and 0.2.6, 0.2.7.dev20260201 "
        "with TE 2.20.2",
        seen=(_FEATURES_RUN, _TE18_RUN),
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
        "`self.parent_recipe is recipe` and otherwise creates a new RecipeState (transformer_engine_v2ex_impl.py the "
        "same in 0.2.3-0.2.5); eager TE (module/base.py init_fp8_metadata, set_meta_tensor) does nothing for an "
        "equal recipe and, for another DelayedScaling recipe, keeps the state and adjusts its amax history length. "
        "A loop that builds its recipe inline (te.autocast(recipe=DelayedScaling())) never accumulates an amax history",
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
        cause="thunder/transforms/autocast.py _linear_autocast_impl downcasts a, w (and bias) with maybe_downcast_to "
        "before prims.linear, which the TE executor then takes (the legacy one runs TE's _Linear on those copies); "
        "eager te.Linear (module/linear.py _Linear.forward) quantizes the fp32 input and parameter with their "
        "quantizers and casts for AMP only without FP8. A value near an E4M3 rounding midpoint rounds to another "
        "E4M3 value, and the E5M2 gradients carry that beyond TE's own tolerances from step 0 (seen: 4 of 256 outputs "
        "and 88 of 2048 weight-gradient entries of the first linear outside them, both executors alike). Seen on "
        "0.2.3 .. 0.2.7 dev builds with TE 2.9-2.20, and on 0.2.0.dev20240728 and dev20240901 with TE 1.8.0 (legacy); "
        "the builds between are read, not run",
        seen=(_FEATURES_RUN, _FEATURES_RUN_TE29, _VERSIONS_RUN_TE29, _RELEASES_RUN_TE29, _TE18_RUN),
    ),
    KnownDefect(
        id="legacy-checkpointing-records-amax-twice",
        summary="with the legacy TE executor, a linear under activation checkpointing records its amaxes again when "
        "the backward recomputes it, after the step's update: its FP8 state and gradients part from eager TE's",
        executors=("legacy",),
        signature=signatures.RECOMPUTE_RECORDS_AMAX_AGAIN,
        checks=(checks.ACTIVATION_CHECKPOINTING,),
        thunder=">=0.2.4,<0.2.7",
        te=">=2.9,<2.10",
        cause="seen, not read in source: the legacy executor's te_linear_N is a TELinear module whose forward "
        "(transformer_engine_v1ex.py) records the input and weight amaxes in its fp8_meta; thunder's checkpointing "
        "runs the checkpointed te_linear_N again in the backward program, after the forward's amax reduction and "
        "update, so the recomputation writes its amaxes into the slot the update had cleared (3.47 where eager TE "
        "holds 0) and quantizes with the state as it then is: gradients part from step 0. The functional executor "
        "has its own checkpointing transform (0.2.5+), which keeps one update per state; the legacy one has none. "
        "Seen on 0.2.4, 0.2.5 and 0.2.6 with TE 2.9.0 (from TE 2.10 the legacy executor has no TE). The lower bound is the "
        "first build whose legacy executor runs on TE 2.9.0 at all: a GPU bisect found every build from 0.2.3 to "
        "0.2.4.dev20250622 raising legacy-executor-miscounts-te-2.9-saved-tensors first, and 0.2.4 showing this",
        seen=(_FEATURES_RUN_TE29, _FEATURES_RUN_TE29_82BFE86, _VERSIONS_RUN_TE29,
              f"{_ENTRY_BISECTS_TE29}/ckpt-twice-from"),
    ),
    KnownDefect(
        id="functional-amax-not-reduced-across-ranks",
        summary="before thunder 0.2.5.dev20250824 the functional TE executor does not all-reduce amaxes across data-parallel "
        "ranks: each rank's FP8 scales follow its own data",
        executors=("functional",),
        signature=signatures.RANKS_PART_UNREDUCED,
        checks=(checks.DDP, checks.DDP_FIRST_STEP, checks.DDP_LLAMA),
        thunder=">=0.2.3,<=0.2.5.dev20250817",
        te=_SEEN_TE29,
        cause="transformer_engine_v2ex_impl.py (0.2.3, 0.2.4) updates each recipe state from its own amax history; "
        "the all-reduce of state.amax_history over the default group came with thunder PR #2404 (0.2.5), the one "
        "that teparity's mutant functional-no-cross-rank-reduction removes. Eager TE reduces amaxes over the "
        "fp8_autocast group. Seen on 0.2.3, 0.2.4 and the weekly builds 0.2.5.dev20250803 .. 0.2.5.dev20250817 with TE "
        "2.9.0. A GPU fix bisect: 0.2.5.dev20250817 is the last build with it, 0.2.5.dev20250824 the first without, "
        "the build where functional-fp8-group-ignored starts (the all-reduce over the default group)",
        seen=(_VERSIONS_RUN_TE29, _FEATURES_RUN_TE29_82BFE86, _RELEASES_WEEKLIES_RUN_TE29,
              _FIX_BISECTS_TE29, _CLEAN_RELEASES_RUN_TE29),
        bounds=(BisectedBound("thunder", "<=0.2.5.dev20250817", f"{_RANGE_BISECTS_TE29}/unreduced-fix/bisect.json"),),
    ),
    KnownDefect(
        id="functional-checkpointing-saves-te-linears",
        summary="up to thunder 0.2.5.dev20250629 thunder.jit under activation checkpointing recomputes none of the functional "
        "executor's TE linears: the checkpointed region keeps its activations",
        executors=("functional",),
        signature=signatures.CHECKPOINTED_LINEARS_NOT_RECOMPUTED,
        checks=(checks.ACTIVATION_CHECKPOINTING,),
        thunder=">=0.2.3,<=0.2.5.dev20250629",
        te=_SEEN_TE29,
        cause="seen, not read in source: on 0.2.3, 0.2.4 and 0.2.5.dev20250629 (TE 2.9.0) the backward trace of a "
        "torch.utils.checkpoint region holds no te_functional_linear_fwd, so the region's TE linears are saved, not "
        "recomputed. 0.2.5.dev20250706 .. 0.2.5.dev20250803 recompute them, and show "
        "functional-checkpointing-updates-fp8-state-twice instead; the executor's own checkpointing transform "
        "ships in 0.2.5.dev20250810 (docs/results/wheels-functional-checkpointing-transform), clean on the GPU. "
        "A GPU fix bisect (docs/results/h200-te2.9.0-04f6fc3-bisects/ckpt-saves-fix) was cut off, every build it "
        "ran between 0.2.4 and 0.2.5.dev20250810 hidden by that other defect; 0.2.5.dev20250629 showed this one as "
        "a near miss in docs/results/h200-te2.9.0-04f6fc3-bisects/twice-from",
        seen=(_VERSIONS_RUN_TE29, _FEATURES_RUN_TE29_82BFE86, _CLEAN_RELEASES_RUN_TE29),
    ),
    KnownDefect(
        id="functional-thunderfx-checkpointing-backward-unbound",
        summary="up to thunder 0.2.5.dev20250629 a checkpointed region compiled with thunderfx fails in its backward: the "
        "backward reads a forward tensor (a TE linear's output, an activation's input) that it never computes",
        executors=("functional",),
        signature=signatures.RECOMPUTE_READS_AN_UNBOUND_FORWARD_TENSOR,
        checks=(checks.ACTIVATION_CHECKPOINTING,),
        thunder=">=0.2.3,<=0.2.5.dev20250629",
        te=_SEEN_TE29,
        cause="seen, not read in source: thunder.backward_fn passes te_functional_linear_bwd a quantized forward "
        "tensor (t29 on 0.2.3, t30 on 0.2.4) that no line of the backward defines, and in the case with a GELU "
        "between the linears reads the activation's forward input (t69, at a torch.mul) that it never recomputes; "
        "the functional executor's checkpointing transform (first in 0.2.5.dev20250810: docs/results/wheels-"
        "functional-checkpointing-transform) is absent. A GPU fix bisect "
        "(docs/results/h200-te2.9.0-04f6fc3-bisects/thunderfx-fix) was cut off: "
        "0.2.5.dev20250810 is clean, 0.2.5.dev20250706 .. 0.2.5.dev20250803 show "
        "functional-checkpointing-updates-fp8-state-twice instead; the gate on 0.2.5.dev20250629 failed both thunderfx "
        "cases as near misses of this entry (docs/results/h200-te2.9.0-db1ecfc), so the range ends there",
        seen=(_VERSIONS_RUN_TE29, _FEATURES_RUN_TE29_82BFE86, _RELEASES_RUN_TE29,
              _CLEAN_RELEASES_RUN_TE29, _WEEKLIES_RUN_TE29),
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
        cause="seen, not read in source: the backward trace of a checkpointed region updates (te_fp8_amax_and_scale_update) "
        "the FP8 states that the forward trace created and updated, where eager TE updates each state once a step; "
        "both thunder.jit and thunderfx, both recipes. The executor's _te_activation_checkpointing_transform first "
        "ships in 0.2.5.dev20250810 (read in the wheels: docs/results/wheels-functional-checkpointing-transform), "
        "and a GPU fix bisect found that build clean. Where it starts (GPU, TE 2.9.0, "
        "docs/results/h200-te2.9.0-04f6fc3-bisects/twice-from): "
        "0.2.5.dev20250706 is the first build with it; 0.2.5.dev20250629 still recomputes no TE linear (a near miss "
        "of functional-checkpointing-saves-te-linears), so it cannot update a state twice, and 0.2.4 has that defect "
        "in its range; the bisect log ends without a boundary for that reason",
        seen=(_RELEASES_WEEKLIES_RUN_TE29, _FIX_BISECTS_TE29, _CLEAN_RELEASES_RUN_TE29),
        bounds=(BisectedBound("thunder", "<=0.2.5.dev20250803", f"{_FIX_BISECTS_TE29}/twice-last.json"),),
    ),
    KnownDefect(
        id="thunder-sdpa-params-predate-torch-2.5",
        summary="a thunder/torch pairing: thunder builds up to 0.2.0.dev20240728 call torch's _SDPAParams with the 6 "
        "arguments of torch 2.4, which torch 2.5+ refuses: every model with scaled-dot-product attention fails to trace "
        "on a CUDA device",
        executors=("legacy", "functional"),
        signature=signatures.SDPA_PARAMS_OF_SIX,
        checks=(checks.LLAMA_BLOCK, checks.DDP_LLAMA, checks.DDP_LLAMA_GRAD_ACCUMULATION),
        thunder=">=0.2.0.dev20240404,<0.2.0.dev20240804",
        te=">=1.6",
        torch=">=2.5",
        cause="thunder/executors/sdpaex.py (dev20240728: line 662) builds SDPAParams(query, key, value, mask, dropout_p, "
        "is_causal) in its checker; torch 2.5 added enable_gqa as a 7th argument, which 0.2.0.dev20240804 passes where "
        "torch has it. Not a TE executor defect: a build older than the torch it runs with (a TE 1.6-1.8 host has torch "
        "2.4, where it runs). Read in every build from 0.2.0.dev20240404 to dev20240728, reproduced on the CPU by "
        "driving the checker with CUDA proxies (torch 2.11 raises, 2.4.1 builds it: docs/results/cpu-thunder-2024-sdpa-"
        "checkpoint-nograd), seen on the GPU with TE 1.8.0",
        seen=(_TE18_RUN,),
    ),
    KnownDefect(
        id="thunder-torchcompile-cat-segfault-on-llama",
        summary="thunder 0.2.0.dev20240901 dies of SIGSEGV while it fuses the llama block for its torchcompile_cat "
        "executor, on a CUDA device",
        executors=("legacy", "functional"),
        signature=signatures.TORCHCOMPILE_CAT_SEGFAULT,
        checks=(checks.LLAMA_BLOCK, checks.DDP_LLAMA, checks.DDP_LLAMA_GRAD_ACCUMULATION),
        thunder="==0.2.0.dev20240901",
        te=">=1.8,<1.9",
        cause="seen, not understood: the faulthandler stack ends in thunder/core/transform_common.py order_proxies "
        "(optree.tree_iter) under executors/torch_compile.py fusion_pass, with torchcompile_cat among the default "
        "executors (from dev20240901; it takes CUDA tensors only). Python 3.12.3, torch 2.11.0, TE 1.8.0 on the H200; on "
        "the CPU, with that executor forced to take CPU tensors and the sdpa executor's claims emulated, the same "
        "function ran without a crash on Python 3.11 and 3.12, torch 2.4.1 and 2.11, forked or not, optree 0.12-0.20. "
        "The range is the one build seen (the CPU runs: docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd)",
        seen=(_TE18_RUN,),
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
        cause="thunder interprets torch's non-reentrant checkpoint code: with torch 2.11 its interpreter cannot evaluate "
        "the list[Any] annotation of a function nested in torch.utils._pytree.tree_flatten (the 'idx' error), with torch "
        "2.4-2.5 it reaches torch.empty(..., requires_grad=True) in checkpoint.py, which thunder.jit does not support; "
        "0.2.0.dev20241020 .. dev20250105 add a lookaside for torch.utils.checkpoint.checkpoint that calls the region "
        "uninterpreted (a TensorProxy passed to linear); 0.2.0.dev20250112 interprets it and matches eager. On the CPU "
        "without TE, builds dev20240728 .. dev20250112 (dev20241027 .. dev20241124 read, not run: docs/results/cpu-thunder-"
        "2024-sdpa-checkpoint-nograd); on the GPU with TE "
        "1.8.0 on dev20240728 and dev20240901",
        seen=(_TE18_RUN,),
    ),
)
