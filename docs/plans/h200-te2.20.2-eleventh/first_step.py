"""Where a forked rank's first FP8 step goes on an idle GPU, by what its parent imported before the fork.

usage: python3 first_step.py STAGE OUT_PREFIX   (STAGE 1: torch and TE; 2: also torch's compiler, as
teparity.stack.versions.COMPILER_MODULES, and triton's cache key), run with PYTORCH_NVML_BASED_CUDA_CHECK as
the gate's ranks have it (the eleventh session runs both stages with it set to 1; the tenth ran them without it,
and stage 2's child could not use CUDA). The child creates the CUDA context, imports
thunder, then runs three steps of a TE Linear under DelayedScaling with TE's Python scale update
(NVTE_UNFUSED_FP8_UPDATE=1, the functional executor's reference), the first one under cProfile. Writes
OUT_PREFIX.json (each phase's seconds) and OUT_PREFIX.txt (the first step's 30 costliest calls).
"""
import cProfile
import io
import json
import os
import pstats
import sys
import time

os.environ["NVTE_UNFUSED_FP8_UPDATE"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
stage, prefix = int(sys.argv[1]), sys.argv[2]
phases = {}
clock = time.monotonic()


def took(what):
    global clock
    now = time.monotonic()
    phases[what] = round(now - clock, 3)
    clock = now


import torch  # noqa: E402

took("parent: import torch")
import transformer_engine.pytorch as te  # noqa: E402

took("parent: import transformer_engine.pytorch")
if stage == 2:
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    import torch._inductor.runtime.triton_heuristics  # noqa: F401
    from torch._inductor.runtime.triton_compat import HAS_TRITON, triton_key

    took("parent: import the compiler")
    if HAS_TRITON:
        triton_key()
    took("parent: triton key")
pid = os.fork()
if pid == 0:
    try:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        took("child: CUDA context")
        import thunder  # noqa: F401

        took("child: import thunder")
        from transformer_engine.common.recipe import DelayedScaling

        model = te.Linear(256, 256, params_dtype=torch.bfloat16).cuda()
        x = torch.randn(32, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        torch.cuda.synchronize()
        took("child: build te.Linear")
        profile = cProfile.Profile()
        for step in range(3):
            if step == 0:
                profile.enable()
            with te.fp8_autocast(enabled=True, fp8_recipe=DelayedScaling()):
                y = model(x)
            y.float().sum().backward()
            torch.cuda.synchronize()
            if step == 0:
                profile.disable()
            took(f"child: fp8 step {step}")
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(30)
        with open(f"{prefix}.txt", "w") as out:
            out.write(text.getvalue())
    except BaseException as error:  # noqa: BLE001
        phases["child error"] = f"{type(error).__name__}: {error}"
    phases["PYTORCH_NVML_BASED_CUDA_CHECK"] = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    with open(f"{prefix}.json", "w") as out:
        json.dump({"stage": stage, "phases": phases}, out, indent=1)
    os._exit(0)
os.waitpid(pid, 0)
