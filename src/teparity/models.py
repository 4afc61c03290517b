"""Models for the tiers, built from seeded generators so that every rank and both sides get equal weights."""

from __future__ import annotations

import torch


def plain_mlp(
    sizes: tuple[int, ...] = (32, 64, 16),
    *,
    seed: int = 0,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
    bias: bool = True,
) -> torch.nn.Sequential:
    """``nn.Linear`` layers with GELU between them: the program thunder compiles and hands to TE.

    Feature sizes are multiples of 16 so that TE's FP8 shape checks accept every linear.
    """
    generator = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for index, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        if index:
            layers.append(torch.nn.GELU())
        linear = torch.nn.Linear(fan_in, fan_out, bias=bias)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(fan_out, fan_in, generator=generator) / fan_in**0.5)
            if bias:
                linear.bias.copy_(torch.randn(fan_out, generator=generator) * 0.1)
        layers.append(linear)
    return torch.nn.Sequential(*layers).to(device=device, dtype=dtype)


def seeded_input(shape: tuple[int, ...], *, test_seed: int, step: int, rank: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """Input for (test, step, rank): deterministic across runs, different across ranks and steps."""
    generator = torch.Generator().manual_seed(hash((test_seed, step, rank)) & 0x7FFFFFFF)
    return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)
