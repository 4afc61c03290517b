"""The known defects of thunder's tracing and transforms beside the TE executors: what reaches the executors
(torch.autocast's bfloat16 copies, a no-grad trace's ltorch.linear), what fails to trace (a module's parameters under
symbolic values; SDPA's parameters on torch 2.5+ and thunderfx on torch 2.12, thunder/torch pairings) and what dies
fusing (torchcompile_cat on thunder's 2024 builds)."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect
from teparity.known.runs import (
    COMBINATIONS_RUN_TE220,
    COMBINATIONS_RUN_TE29,
    CPU_TORCH212_RUN,
    FEATURES_RUN,
    FEATURES_RUN_TE29,
    RELEASES_RUN_TE29,
    TE18_RUN,
    TE18_RUN_B4F3E73,
    VERSIONS_RUN_TE29,
)

NO_GRAD_FORWARD_LEFT_TO_TORCH = KnownDefect(
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
    seen=(FEATURES_RUN, TE18_RUN),
)

SYMBOLIC_VALUES_CANNOT_UNPACK_MODULE_PARAMETERS = KnownDefect(
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
    seen=(COMBINATIONS_RUN_TE29, COMBINATIONS_RUN_TE220, "docs/results/cpu-bisect-symbolic-values"),
)

AUTOCAST_QUANTIZES_BF16_COPIES = KnownDefect(
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
    seen=(FEATURES_RUN, FEATURES_RUN_TE29, VERSIONS_RUN_TE29, RELEASES_RUN_TE29, TE18_RUN),
)

THUNDER_SDPA_PARAMS_PREDATE_TORCH_2_5 = KnownDefect(
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
    seen=(TE18_RUN, TE18_RUN_B4F3E73),
)

THUNDER_TORCHCOMPILE_CAT_SEGFAULT_ON_LLAMA = KnownDefect(
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
    seen=(TE18_RUN, TE18_RUN_B4F3E73),
)

THUNDERFX_CANNOT_INTERPRET_TORCH_2_12_FX_CODEGEN = KnownDefect(
    id="thunderfx-cannot-interpret-torch-2.12-fx-codegen",
    summary="a thunder/torch pairing: on torch 2.12 thunderfx raises at its first call, inside torch.fx's code "
    "generation of the split graph module, which thunder's interpreter traces",
    executors=(None, "legacy", "functional"),
    signature=signatures.FX_CODEGEN_NOT_INTERPRETED,
    checks=(checks.THUNDERFX_TRANSFORM, checks.THUNDERFX, checks.DDP_THUNDERFX, checks.FSDP2_THUNDERFX,
            "activation-checkpointing[thunderfx-delayed]", "activation-checkpointing[thunderfx-delayed-e4m3-len4-max]",
            "fsdp-activation-checkpointing[fsdp2-thunderfx-zero3]"),
    thunder=">=0.2.1,<0.2.8",
    te=">=1.6",
    without_te=True,
    torch=">=2.12,<2.13",
    cause="torch 2.12's GraphModule recompiles lazily, so thunder's interpreter traces torch/fx/graph.py _python_code "
    "when thunderfx first calls a split module: from 0.2.5 it fails on `len(user.users.keys())` in delete_unused_values "
    "(thunder/core/interpreter.py's len() has no keys view: thunder.jit of `len(d.keys())` raises on torch 2.11 too), "
    "0.2.1 .. 0.2.4 on the Graph's node list. Every declared build raises on the CPU with torch 2.12.1 "
    "(thunderfx-matches-torch), 0.2.6 with 2.12.0 too, none with 2.11.0. The TE rows compiled with thunderfx meet the "
    "same call: covered by reading, not run (the GPU hosts have torch 2.11.0)",
    seen=(CPU_TORCH212_RUN,),
)
