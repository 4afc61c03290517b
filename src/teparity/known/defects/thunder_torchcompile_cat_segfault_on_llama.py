"""Known upstream defect ``thunder-torchcompile-cat-segfault-on-llama``: thunder 0.2.0.dev20240901 dies of SIGSEGV
while it fuses the llama block for its torchcompile_cat executor, on a CUDA device."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="thunder-torchcompile-cat-segfault-on-llama",
    summary="thunder 0.2.0.dev20240901 dies of SIGSEGV while it fuses the llama block for its torchcompile_cat "
    "executor, on a CUDA device",
    executors=("legacy", "functional"),
    signature=signatures.TORCHCOMPILE_CAT_SEGFAULT,
    checks=checks.LLAMA_RUNS,
    thunder=">=0.2.0.dev20240818,<=0.2.0.dev20240901",
    te=">=1.8",
    cause="seen, not understood: the stack ends in thunder/core/transform_common.py order_proxies (optree.tree_iter) under "
    "executors/torch_compile.py fusion_pass. torchcompile_cat is a default executor from dev20240818 (thunder/__init__.py "
    "add_default_executor; CUDA only by its cuda_device_checker; read in the wheels: not in dev20240728 .. dev20240811, "
    "gone in 0.2.3). Run on the H200 (Python 3.12.3, torch 2.11.0, TE 1.8.0) on dev20240818 and dev20240901, every llama "
    "check; on the CPU the same function did not crash (Python 3.11/3.12, torch 2.4.1/2.11, optree 0.12-0.20: "
    "docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd). The range is the builds seen: on 0.2.2 with TE 2.20.2 the "
    "legacy executor claims no linear and the same pass does not crash",
    seen=("docs/results/h200-te1.8.0-4306794", "docs/results/h200-te1.8.0-b4f3e73"),
    fixed=(FixSeen("thunder", "<=0.2.0.dev20240901", "docs/results/h100-matrix-a42f2cc/te-2.9.0/te2.9.0-th0.2.2.json.gz"),),
)
