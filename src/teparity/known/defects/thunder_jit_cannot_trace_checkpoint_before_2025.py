"""Known upstream defect ``thunder-jit-cannot-trace-checkpoint-before-2025``: thunder.jit before 0.2.0.dev20250112
cannot trace a torch.utils.checkpoint region: the thunder side raises while tracing."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
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
    seen=("docs/results/h200-te1.8.0-4306794",),
    fixed=(FixSeen("thunder", "<0.2.0.dev20250112", "docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd/task2-checkpoint/checkpoint_cpu.log"),),
)
