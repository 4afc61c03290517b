"""Is the fp32 bias the whole cause of known defect ``functional-fp32-bias-in-fp8-gemm``? A diagnosis behind
teparity.gate.known_defects, not a gate check (an FP8 GPU host with TE and thunder's functional executor).

One fp32 linear with a bias, one forward under DelayedScaling, three ways: eager ``te.Linear``; thunder's
functional executor as shipped; and the same executor with ``BasicLinear._functional_forward`` handed the
bias in bf16, as eager ``te.Linear`` does for FP8 GEMMs (module/linear.py). If the shipped executor raises
cuBLAS's "Unable to find suitable cuBLAS GEMM algorithm" and the bf16-bias one matches eager TE bitwise,
the bias dtype is the cause. Prints and writes a JSON verdict.

usage: python3 scripts/fp32_bias_probe.py OUT.json
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from teparity.inrank.models import plain_mlp, seeded_input, te_twin
from teparity.stack import recipes
from teparity.stack.executors import find_te_executors
from teparity.stack.te_api import te_autocast
from teparity.stack.thunder_api import jit_options
from teparity.stack.versions import Versions

SIZES = (64, 32)


def _thunder_forward(plain: torch.nn.Module, x: torch.Tensor, recipe: Any) -> torch.Tensor:
    import thunder

    jitted = thunder.jit(plain, **jit_options(find_te_executors()["functional"], recipe))
    with te_autocast(recipe):
        return jitted(x)


def _bias_in_bf16(real: Any) -> Any:
    """``BasicLinear._functional_forward`` with an fp32 bias cast to bf16 for a quantized GEMM."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        bias = kwargs.get("bias")
        if bias is not None and bias.dtype == torch.float32 and kwargs.get("with_quantized_compute"):
            kwargs["bias"] = bias.to(torch.bfloat16)
        return real(*args, **kwargs)

    return staticmethod(forward)


def probe() -> dict[str, Any]:
    from transformer_engine.pytorch.ops import BasicLinear

    recipe = recipes.build("delayed")
    plain = plain_mlp(SIZES, seed=0, device="cuda", dtype=torch.float32, bias=True, activation=None)
    x = seeded_input((16, SIZES[0]), test_seed=0, step=0, rank=0, device="cuda", dtype=torch.float32)
    eager_model = te_twin(plain)
    with te_autocast(recipe):
        eager = eager_model(x).detach()
    verdict: dict[str, Any] = {"versions": vars(Versions.installed()), "case": f"{SIZES} fp32 with bias, 16 tokens"}
    try:
        _thunder_forward(plain, x, recipe)
        verdict["shipped"] = "ran"
    except Exception as error:
        verdict["shipped"] = f"raised {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    real = BasicLinear.__dict__["_functional_forward"].__func__
    BasicLinear._functional_forward = _bias_in_bf16(real)
    try:
        out = _thunder_forward(plain, x, recipe).detach()
        verdict["bias_in_bf16"] = {
            "bitwise_equal_to_eager": bool(torch.equal(out, eager)),
            "max_abs_difference": float((out.double() - eager.double()).abs().max()),
        }
    except Exception:
        verdict["bias_in_bf16"] = f"raised: {traceback.format_exc().splitlines()[-1]}"
    finally:
        BasicLinear._functional_forward = staticmethod(real)
    return verdict


if __name__ == "__main__":
    result = probe()
    print(json.dumps(result, indent=2))
    Path(sys.argv[1]).write_text(json.dumps(result, indent=2) + "\n")
