"""A GPU diagnostic, not part of the gate: after which import a forked child can no longer run CUDA (the
environment probe checks one stage of thunder, thunder.dynamo and inductor's compile_fx at once), and what
a rank process's first eager TE linear costs, step by step (a rank's first eager side takes 5-8 s, its
later ones under 1 s). Run as ``python3 fork_and_first_run.py fork`` and ``... first-run``."""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def forked_child_runs_cuda() -> str:
    pid = os.fork()
    if pid == 0:
        try:
            import torch

            torch.ones(2, device="cuda").add(1).sum().item()
            os._exit(0)
        except BaseException as error:  # noqa: BLE001 - the child reports any failure and exits
            sys.stderr.write(f"    child: {type(error).__name__}: {str(error).splitlines()[0][:120]}\n")
            os._exit(1)
    return "a forked child runs CUDA" if os.waitpid(pid, 0)[1] == 0 else "a forked child FAILED"


def fork() -> None:
    import torch

    steps = [("torch", lambda: None), ("transformer_engine.pytorch", lambda: __import__("transformer_engine.pytorch"))]
    for module in ("thunder", "thunder.executors.transformer_engineex", "thunder.dynamo", "torch._inductor.compile_fx"):
        steps.append((module, lambda module=module: __import__(module)))

    def key() -> None:
        from torch._inductor.runtime.triton_compat import HAS_TRITON, triton_key

        if HAS_TRITON:
            triton_key()

    steps.append(("triton_key()", key))
    for label, step in steps:
        start = time.perf_counter()
        step()
        print(f"after {label} ({time.perf_counter() - start:.2f} s): {forked_child_runs_cuda()}; "
              f"torch.cuda.is_initialized()={torch.cuda.is_initialized()}", flush=True)


def first_run() -> None:
    start = time.perf_counter()
    import torch
    import transformer_engine.pytorch as te

    print(f"import torch, transformer_engine.pytorch: {time.perf_counter() - start:.2f} s", flush=True)
    x = None
    linear = None

    def cuda() -> None:
        torch.zeros(1, device="cuda")

    def matmul() -> None:
        a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
        (a @ a).sum().item()

    def build() -> None:
        nonlocal linear, x
        linear = te.Linear(256, 256, params_dtype=torch.bfloat16).cuda()
        x = torch.randn(32, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def step() -> None:
        with te.fp8_autocast(enabled=True):
            y = linear(x)
        y.float().sum().backward()
        torch.cuda.synchronize()

    for label, call in (("CUDA context", cuda), ("first bf16 matmul (cuBLAS)", matmul), ("te.Linear on the GPU", build),
                        ("first FP8 forward and backward", step), ("second", step), ("third", step)):
        start = time.perf_counter()
        try:
            call()
            said = ""
        except Exception as error:  # noqa: BLE001 - a diagnostic reports and goes on
            said = f" raised {type(error).__name__}: {str(error).splitlines()[0][:160]}"
        print(f"{label}: {time.perf_counter() - start:.2f} s{said}", flush=True)


if __name__ == "__main__":
    {"fork": fork, "first-run": first_run}[sys.argv[1]]()
