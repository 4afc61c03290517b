"""Inside a rank: thunder's 8-bit inference (``thunder.transforms.te_inference.TEInference8BitTransform`` with its
``quant_te`` executor: every ``nn.Linear`` weight stored as E4M3 at per-tensor scale 448/amax, each linear a
``te_linear_fp8``) or its eager model, TE parts alone (``side="model"``): each weight quantized by TE's
``Float8Quantizer`` at that scale, the GEMM TE's ``BasicLinear._functional_forward`` on the quantized weight without
quantized compute (the dequantized weight, in the input's dtype), the bias added after the GEMM, as thunder's
``te_linear_fp8`` does. Bitwise equal in bfloat16 and float32 on TE 2.9.0 and 2.20.2 (docs/facts.md); plain torch on
the unquantized weights differs by 0.03, thunder's own test's atol 0.1.

Each side returns its outputs of ``spec.passes`` no-grad forwards with seeded inputs, and (thunder) the symbols of its
last execution trace, as ``records.Inference8BitRun``."""

from __future__ import annotations

import dataclasses
from typing import Any

from teparity.records import Inference8BitRun, RankError
from teparity.strategies import STRATEGIES, Strategy

#: The symbol of a quantized linear in thunder's execution trace.
QUANTIZED_LINEAR = "te_linear_fp8"


@dataclasses.dataclass(frozen=True)
class Inference8BitSpec:
    """thunder's 8-bit inference (``side="thunder"``) or its eager model (``side="model"``) of ``plain_mlp`` with bias
    and no activation (the linears alone: nothing of thunder's own arithmetic between them), on one rank's GPU."""

    side: str = "thunder"
    dtype: str = "bfloat16"
    passes: int = 2
    batch: int = 16
    sizes: tuple[int, ...] = (64, 128, 32)
    strategy: str = "one-rank"

    @property
    def parallel(self) -> Strategy:
        return STRATEGIES[self.strategy]


def inference8bit_run(rank: int, world_size: int, spec: Inference8BitSpec) -> Inference8BitRun:
    """``spec.passes`` forwards under ``torch.no_grad`` with inputs seeded by pass and rank. thunder's side returns
    what it raised instead of raising (a one-rank run: no collective waits on it)."""
    import torch

    from teparity.inrank.networks import plain_mlp, seeded_input

    dtype = getattr(torch, spec.dtype)
    network = plain_mlp(spec.sizes, seed=0, activation=None, bias=True, device="cuda:0", dtype=dtype).requires_grad_(False)
    try:
        forward, trace = _thunder(network) if spec.side == "thunder" else (_model(network), None)
        outputs = []
        with torch.no_grad():
            for step in range(spec.passes):
                x = seeded_input((spec.batch, spec.sizes[0]), test_seed=11, step=step, rank=rank, device="cuda:0", dtype=dtype)
                outputs.append(forward(x).detach().cpu())
    except Exception as error:
        return Inference8BitRun(error=RankError.of(error))
    symbols = tuple(b.sym.name for b in trace().bound_symbols) if trace is not None else ()
    return Inference8BitRun(tuple(outputs), symbols)


def _thunder(network: Any) -> tuple[Any, Any]:
    import thunder
    from thunder.transforms.te_inference import TEInference8BitTransform

    transform = TEInference8BitTransform()
    compiled = thunder.jit(network, transforms=[transform], executors=(transform.get_executor(), *thunder.get_default_executors()))
    return compiled, lambda: thunder.last_traces(compiled)[-1]


def _model(network: Any) -> Any:
    """The eager model: each ``nn.Linear`` of ``network`` in place replaced by ``_quantized_linear`` of it."""
    import torch

    for name, module in list(network.named_modules()):
        if isinstance(module, torch.nn.Linear):
            owner, _, leaf = name.rpartition(".")
            setattr(network.get_submodule(owner) if owner else network, leaf, _quantized_linear(module))
    return network


def _quantized_linear(linear: Any) -> Any:
    """``te_linear_fp8``'s arithmetic from TE's parts: the weight in E4M3 at 448/amax (``Float8Quantizer``), TE's GEMM
    on it without quantized compute, then the bias."""
    import torch
    import transformer_engine.pytorch as te
    import transformer_engine_torch as tex

    weight = linear.weight
    low, high = weight.aminmax()
    amax = torch.maximum(low.abs(), high.abs()).to(torch.float32)
    quantizer = te.Float8Quantizer(scale=torch.finfo(torch.float8_e4m3fn).max / amax, amax=amax,
                                   fp8_dtype=tex.DType.kFloat8E4M3, rowwise=True, columnwise=False)
    quantized, bias = quantizer.quantize(weight), linear.bias

    def forward(x: Any) -> Any:
        out, *_ = te.ops.BasicLinear._functional_forward(x, quantized, with_quantized_compute=False,
                                                         weight_requires_grad=False, input_requires_grad=False)
        return out if bias is None else out + bias

    module = torch.nn.Module()  # a child of the network, as the linear it replaces
    module.forward = forward
    return module
