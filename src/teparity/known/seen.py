"""The newest thunder and TE on which a committed run showed each known defect (its known outcome, or its ``seen``
runs where none recorded one): a stack newer than these lies in the entry's range by extrapolation, which the
header and the report say. ``harness/test_known_defects.py`` recomputes it from the reports under
docs/results/."""

from __future__ import annotations

NEWEST_SEEN: dict[str, tuple[str | None, str | None]] = {
    "legacy-executor-loses-te-from-te-2.10": ('0.2.6', '2.20.2'),
    "functional-executor-loses-te-from-te-2.10": ('0.2.4', '2.20.2'),
    "grad-accumulation-fp8-state-per-cache-entry": ('0.2.7.dev20260201', '2.20.2'),
    "fsdp-no-sync-loses-accumulated-gradients": ('0.2.7.dev20260201', '2.20.2'),
    "fsdp-no-sync-stash-breaks-on-fused-linear-backward": ('0.2.3', '2.9.0'),
    "fsdp-no-sync-stashes-input-grad-as-weight-grad": ('0.2.4', '2.9.0'),
    "functional-fp32-bias-in-fp8-gemm": ('0.2.7.dev20260201', '2.20.2'),
    "legacy-fp8-group-ignored": ('0.2.6', '2.9.0'),
    "functional-fp8-group-ignored": ('0.2.7.dev20260201', '2.20.2'),
    "ddp-transform-rejects-input-grad": ('0.2.3', '2.20.2'),
    "legacy-executor-miscounts-te-2.9-saved-tensors": ('0.2.3', '2.9.0'),
    "fsdp-transform-layer-bucketing-rejects-input-grad": ('0.2.3', '2.20.2'),
    "legacy-backward-sync-dropped-by-delayed-split": ('0.2.7.dev20260201', None),
    "no-grad-forward-left-to-torch": ('0.2.7.dev20260201', '2.20.2'),
    "functional-declines-current-scaling": ('0.2.7.dev20260201', '2.20.2'),
    "functional-checker-asserts-on-current-scaling": ('0.2.5', '2.20.2'),
    "checkpoint-drops-fp8-state": ('0.2.7.dev20260201', '2.20.2'),
    "fp8-state-per-input-shape": ('0.2.7.dev20260201', '2.20.2'),
    "fp8-state-per-linear-call": ('0.2.7.dev20260201', '2.20.2'),
    "functional-block-scaling-quantizer-count": ('0.2.4', '2.9.0'),
    "symbolic-values-cannot-unpack-module-parameters": ('0.2.6', '2.20.2'),
    "functional-new-recipe-object-resets-fp8-state": ('0.2.7.dev20260201', '2.20.2'),
    "autocast-quantizes-bf16-copies": ('0.2.7.dev20260201', '2.20.2'),
    "legacy-checkpointing-records-amax-twice": ('0.2.6', '2.9.0'),
    "functional-amax-not-reduced-across-ranks": ('0.2.5.dev20250817', '2.9.0'),
    "functional-checkpointing-saves-te-linears": ('0.2.5.dev20250629', '2.9.0'),
    "functional-thunderfx-checkpointing-backward-unbound": ('0.2.4', '2.9.0'),
    "functional-jit-checkpointing-backward-unbound": ('0.2.4', '2.9.0'),
    "functional-checkpointing-updates-fp8-state-twice": ('0.2.5.dev20250803', '2.9.0'),
    "thunder-sdpa-params-predate-torch-2.5": ('0.2.0.dev20240728', '1.8.0'),
    "thunderfx-cannot-interpret-torch-2.12-fx-codegen": ('0.2.7.dev20260201', None),
    "thunder-torchcompile-cat-segfault-on-llama": ('0.2.0.dev20240901', '1.8.0'),
    "thunder-jit-cannot-trace-checkpoint-before-2025": ('0.2.0.dev20240901', '1.8.0'),
}
