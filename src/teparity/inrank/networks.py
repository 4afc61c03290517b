"""Models for the tiers, built from seeded generators so that every rank and both sides get equal weights."""

from __future__ import annotations

from typing import Any

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
        layers.append(_seeded_linear(fan_in, fan_out, generator, bias=bias))
    return torch.nn.Sequential(*layers).to(device=device, dtype=dtype)


def _seeded_linear(fan_in: int, fan_out: int, generator: torch.Generator, *, bias: bool = False,
                   trains: bool = True) -> torch.nn.Linear:
    """A linear drawn from ``generator``: its weight scaled by ``1/sqrt(fan_in)``, then its bias (times 0.1)."""
    linear = torch.nn.Linear(fan_in, fan_out, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(fan_out, fan_in, generator=generator) / fan_in**0.5)
        if bias:
            linear.bias.copy_(torch.randn(fan_out, generator=generator) * 0.1)
    return linear.requires_grad_(trains)


def seeded_input(shape: tuple[int, ...], *, test_seed: int, step: int, rank: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """Input for (test, step, rank): deterministic across runs, different across ranks and steps."""
    generator = torch.Generator().manual_seed(hash((test_seed, step, rank)) & 0x7FFFFFFF)
    return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)


#: The suffix of a TE module's FP8 state in a ``state_dict`` (``torch.nn.Module.get_extra_state``).
TE_EXTRA_STATE = "_extra_state"


def without_fp8_state(saved: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint as it is without TE's FP8 state (a ``state_dict`` without its ``_extra_state`` entries)."""
    return {key: value for key, value in saved.items() if not key.endswith(TE_EXTRA_STATE)}


def te_linear(layer: torch.nn.Linear) -> torch.nn.Module:
    """A ``te.Linear`` with ``layer``'s shape, weight, bias and their ``requires_grad``."""
    import transformer_engine.pytorch as te

    weight = layer.weight
    linear = te.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None, params_dtype=weight.dtype,
                       device=weight.device)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if layer.bias is not None:
            linear.bias.copy_(layer.bias)
    for source, target in zip(layer.parameters(), linear.parameters()):
        target.requires_grad_(source.requires_grad)  # a frozen weight stays frozen
    return linear


def te_twin(plain: torch.nn.Module) -> torch.nn.Module:
    """The eager TE side: a copy of ``plain`` with ``te.Linear`` in place of every ``nn.Linear`` at any depth,
    with the same weights and bias (the other modules copied as they are)."""
    import copy

    twin = copy.deepcopy(plain)
    for name, layer in plain.named_modules():
        if name and isinstance(layer, torch.nn.Linear):
            owner, _, leaf = name.rpartition(".")
            setattr(twin.get_submodule(owner) if owner else twin, leaf, te_linear(layer))
    return twin


class Whole(torch.nn.Module):
    """A network behind a module of this file: where Dynamo resumes after a graph break at a distributed wrapper's hook
    (torch DDP's forward, FSDP2's hooks), it skips a frame of ``torch.nn`` (an ``nn.Sequential``'s forward), so thunder
    would get no graph; this forward is compiled whole (seen on the CPU: docs/facts.md, "thunder's FSDP")."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


class CheckpointedMLP(torch.nn.Sequential):
    """A ``plain_mlp`` whose layers before the last linear run under ``torch.utils.checkpoint``
    (non-reentrant, as thunder's own TE checkpointing tests): the backward recomputes those linears. The
    layers are the plain network's own (same names, same parameters)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.utils.checkpoint

        return self[-1](torch.utils.checkpoint.checkpoint(self._head, x, use_reentrant=False))

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        for layer in list(self)[:-1]:
            x = layer(x)
        return x


class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(torch.nn.Module):
    """One llama-style transformer block (pre-norm RMSNorm, causal attention through SDPA with rotary
    embeddings, SwiGLU MLP), every projection an ``nn.Linear`` without bias, all of them direct children
    so that ``te_twin`` swaps each for ``te.Linear``. Rotary uses the real rotate-half form (no complex
    tensors), precomputed for ``max_seq`` positions."""

    HEAD_DIM = 16

    def __init__(self, dim: int, hidden: int, max_seq: int = 64) -> None:
        super().__init__()
        self.heads = dim // self.HEAD_DIM
        self.attention_norm = RMSNorm(dim)
        self.wq = torch.nn.Linear(dim, dim, bias=False)
        self.wk = torch.nn.Linear(dim, dim, bias=False)
        self.wv = torch.nn.Linear(dim, dim, bias=False)
        self.wo = torch.nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = torch.nn.Linear(dim, hidden, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, dim, bias=False)
        inverse = 1.0 / (10000 ** (torch.arange(0, self.HEAD_DIM, 2).float() / self.HEAD_DIM))
        angles = torch.outer(torch.arange(max_seq).float(), inverse)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        #: The MLP's activation: torch's, or a defect model's copy of thunder's (``defect_models.thunder_silu``).
        self.silu: Any = torch.nn.functional.silu

    def _rotary(self, x: torch.Tensor) -> torch.Tensor:
        seq = x.shape[1]
        cos, sin = self.cos[:seq].to(x.dtype)[None, :, None, :], self.sin[:seq].to(x.dtype)[None, :, None, :]
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], dim=-1) * sin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        h = self.attention_norm(x)
        q = self._rotary(self.wq(h).view(batch, seq, self.heads, self.HEAD_DIM)).transpose(1, 2)
        k = self._rotary(self.wk(h).view(batch, seq, self.heads, self.HEAD_DIM)).transpose(1, 2)
        v = self.wv(h).view(batch, seq, self.heads, self.HEAD_DIM).transpose(1, 2)
        attention = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(attention.transpose(1, 2).reshape(batch, seq, dim))
        h = self.ffn_norm(x)
        return x + self.w2(self.silu(self.w1(h)) * self.w3(h))


def llama_block(
    sizes: tuple[int, int, int], *, seed: int = 0, device: str = "cpu", dtype: torch.dtype = torch.float32
) -> LlamaBlock:
    """A ``LlamaBlock`` of width ``sizes[0]`` (= ``sizes[-1]``: the residual stream) and MLP width
    ``sizes[1]``, with seeded weights (scaled like ``plain_mlp``'s) and norm weights near 1."""
    dim, hidden, out = sizes
    if out != dim or dim % LlamaBlock.HEAD_DIM:
        raise ValueError(f"a llama block maps width {dim} to itself in heads of {LlamaBlock.HEAD_DIM}: sizes {sizes}")
    block = LlamaBlock(dim, hidden)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in block.named_parameters():
            if name.endswith("norm.weight"):
                parameter.copy_(1 + 0.1 * torch.randn(parameter.shape, generator=generator))
            else:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) / parameter.shape[1] ** 0.5)
    return block.to(device=device, dtype=dtype)


class AdapterMLP(torch.nn.Module):
    """A frozen base linear with a trainable low-rank adapter beside it (LoRA: ``up(down(x))``, rank
    ``ADAPTER_RANK``), then a frozen head; the input cast to the parameters' dtype first. Only the adapter trains."""

    ADAPTER_RANK = 16

    def __init__(self, d_in: int, d_hidden: int, d_out: int, generator: torch.Generator) -> None:
        super().__init__()
        self.base = _seeded_linear(d_in, d_hidden, generator, trains=False)
        self.down = _seeded_linear(d_in, self.ADAPTER_RANK, generator)
        self.up = _seeded_linear(self.ADAPTER_RANK, d_hidden, generator)
        self.head = _seeded_linear(d_hidden, d_out, generator, trains=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.base.weight.dtype)
        return self.head(self.base(x) + self.up(self.down(x)))


def adapter_mlp(
    sizes: tuple[int, int, int], *, seed: int = 0, device: str = "cpu", dtype: torch.dtype = torch.bfloat16
) -> AdapterMLP:
    """An ``AdapterMLP`` of sizes (input, hidden, output), seeded as ``plain_mlp``."""
    return AdapterMLP(*sizes, torch.Generator().manual_seed(seed)).to(device=device, dtype=dtype)


#: The name under which a model of thunder's per-call FP8 state keeps the second call's linear (``SharedLinearMLP``).
SECOND_CALL = "shared@2"


class SharedLinearMLP(torch.nn.Module):
    """Three linears, the square middle one called twice in each forward (shared weights): ``last(shared(shared(
    first(x))))``. A module registered as ``SECOND_CALL`` (a defect model's) takes the second call."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int, generator: torch.Generator) -> None:
        super().__init__()
        self.first = _seeded_linear(d_in, d_hidden, generator)
        self.shared = _seeded_linear(d_hidden, d_hidden, generator)
        self.last = _seeded_linear(d_hidden, d_out, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.shared(self.first(x))
        return self.last(self._modules.get(SECOND_CALL, self.shared)(h))


def shared_linear_mlp(
    sizes: tuple[int, int, int], *, seed: int = 0, device: str = "cpu", dtype: torch.dtype = torch.float32
) -> SharedLinearMLP:
    """A ``SharedLinearMLP`` of sizes (input, hidden, output), seeded as ``plain_mlp``."""
    return SharedLinearMLP(*sizes, torch.Generator().manual_seed(seed)).to(device=device, dtype=dtype)


class Fp8OffEnds(torch.nn.Sequential):
    """Linears whose first and last run under ``te.autocast(enabled=False)`` inside the caller's FP8 region: the
    common recipe for training stability (the ends in high precision). Its linears are its children, as
    ``plain_mlp``'s. ``ends_off`` False: the ends in FP8 too (a defect model's network: thunder ignoring those regions)."""

    ends_off = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import contextlib

        from teparity.stack.te_api import te_autocast

        first, *middle, last = self
        off = (lambda: te_autocast(None, enabled=False)) if self.ends_off else contextlib.nullcontext
        with off():
            x = first(x)
        for layer in middle:
            x = layer(x)
        with off():
            return last(x)


def fp8_off_ends_mlp(sizes: tuple[int, ...], *, seed: int = 0, device: str = "cpu",
                     dtype: torch.dtype = torch.float32) -> Fp8OffEnds:
    """A ``Fp8OffEnds`` of ``plain_mlp``'s linears (no bias, nothing between them)."""
    return Fp8OffEnds(*plain_mlp(sizes, seed=seed, device=device, dtype=dtype, bias=False, activation=None))


def linear_names(network: torch.nn.Module) -> list[str]:
    """Names of the linears at any depth in definition order ("0", "2", ...; "wq", ...; "block.0" in a nested network):
    the keys of FP8-state snapshots."""
    return [name for name, layer in network.named_modules() if name and isinstance(layer, torch.nn.Linear)]
