"""Patches of thunder's 8-bit inference (``thunder.transforms.te_inference``)."""

from __future__ import annotations

from typing import Any

#: How far off a perturbed weight scale is: 1 %, far beyond what a bfloat16 output rounds away (8 significant bits).
SCALE_OFF = 1.01


def weight_scale_perturbed() -> None:
    """``TEInference8BitTransform.quantize_weight`` returns a scale 1 % off the one it quantized the weight with: the
    stored E4M3 weight dequantizes 1 % small."""
    from thunder.transforms.te_inference import TEInference8BitTransform

    quantize = TEInference8BitTransform.quantize_weight

    def perturbed(self: Any, weight: Any) -> Any:
        quantized, amax, scale = quantize(self, weight)
        return quantized, amax, scale * SCALE_OFF

    TEInference8BitTransform.quantize_weight = perturbed
