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
    activation: str | None = "gelu",
) -> torch.nn.Sequential:
    """``nn.Linear`` layers with GELU (or nothing) between them: the program thunder compiles and hands to TE.

    Feature sizes are multiples of 16 so that TE's FP8 shape checks accept every linear.
    """
    generator = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for index, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        if index and activation == "gelu":
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


def te_twin(plain: torch.nn.Sequential) -> torch.nn.Sequential:
    """The eager TE side: ``te.Linear`` in place of every ``nn.Linear``, with the same weights and bias."""
    import transformer_engine.pytorch as te

    layers: list[torch.nn.Module] = []
    for layer in plain:
        if isinstance(layer, torch.nn.Linear):
            weight = layer.weight
            twin = te.Linear(
                layer.in_features, layer.out_features, bias=layer.bias is not None,
                params_dtype=weight.dtype, device=weight.device,
            )
            with torch.no_grad():
                twin.weight.copy_(weight)
                if layer.bias is not None:
                    twin.bias.copy_(layer.bias)
            layers.append(twin)
        else:
            layers.append(type(layer)())
    return torch.nn.Sequential(*layers)


def linear_names(model: torch.nn.Sequential) -> list[str]:
    """Names of the linear layers in forward order ("0", "2", ...): the keys of FP8-state snapshots."""
    return [name for name, layer in model.named_children() if isinstance(layer, torch.nn.Linear)]
