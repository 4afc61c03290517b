"""A thunder/torch pairing: thunder builds up to 0.2.0.dev20240728 build torch's SDPAParams with torch 2.4's 6
arguments (thunder/executors/sdpaex.py _fused_sdp_choice, called by the sdpa executor's checker), and torch 2.5 and
newer take 7 (enable_gqa, which thunder passes from 0.2.0.dev20240804): thunder.jit of any program with
scaled_dot_product_attention on CUDA tensors fails to compile with TypeError "incompatible constructor arguments" for
torch._C._SDPAParams. One causal attention of bf16 CUDA tensors, forward and backward, under thunder.jit (default
executors) beside eager torch. No TransformerEngine needed; needs a CUDA GPU (for CPU tensors the checker declines
before it builds SDPAParams)."""
import importlib.metadata
import sys
import traceback

import torch


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def step(fn, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> list[torch.Tensor]:
    """The output and the gradients of q, k and v."""
    out = fn(q, k, v)
    return [out, *torch.autograd.grad(out.float().sum(), (q, k, v))]


def main() -> None:
    if not torch.cuda.is_available():
        cannot("no CUDA GPU (thunder's sdpa executor builds SDPAParams for CUDA tensors only)")
    try:
        import thunder
    except Exception as error:  # noqa: BLE001
        cannot(f"lightning-thunder does not import: {error}")
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, torch {torch.__version__} (SDPAParams takes "
          f"{'7 arguments, enable_gqa' if hasattr(torch.backends.cuda.SDPAParams, 'enable_gqa') else '6 arguments'})")
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    expected = step(attention, q, k, v)
    try:
        got = step(thunder.jit(attention), q, k, v)
    except Exception as error:  # noqa: BLE001
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        print(f"thunder.jit raised {type(error).__name__}: {str(error).splitlines()[0][:200]}")
        if "incompatible constructor arguments" in text and "_SDPAParams" in text:
            where = [f"{frame.name} ({frame.filename.rsplit('/', 1)[-1]})" for frame in traceback.extract_tb(error.__traceback__)]
            print(f"REPRODUCED: thunder builds torch._C._SDPAParams with arguments this torch refuses, in "
                  f"{' <- '.join(reversed(where[-3:]))}; eager torch ran the attention")
            sys.exit(0)
        print("NOT REPRODUCED: thunder raised, but not torch's refusal of its SDPAParams (another defect)")
        sys.exit(1)
    differences = [(a.float() - b.float()).abs().max().item() for a, b in zip(got, expected)]
    print(f"NOT REPRODUCED: thunder compiled and ran the attention; max |thunder - eager| over the output and the "
          f"gradients {max(differences):.3g}")
    sys.exit(1)


if __name__ == "__main__":
    main()
