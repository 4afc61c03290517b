"""Which collectives gloo runs on CUDA tensors, with its ranks sharing one GPU: read by 2 spawned ranks in
a one-off subprocess, cached as JSON per interpreter, torch and visible GPUs (as ``envprobe``).

The fsdp tier needs, on CUDA tensors, what thunder's FSDP and torch's FSDP2 issue: ``all_gather_into_tensor``
(parameters), ``reduce_scatter_tensor`` (gradients; FSDP2 with ``ReduceOp.AVG`` for fp32/bf16, thunder
with SUM after a pre-division), ``all_reduce`` (TE's amax reduction, MAX) and ``broadcast``. Where the
backend is gloo (fewer GPUs than ranks), ``gloo_cuda_reason`` says which one gloo refuses, with its exact
error, and the tier skips with that; with NCCL it is not asked. ``scripts/gloo_cuda_collectives_probe.py``
prints the same table on a GPU host.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from teparity.stack.versions import installed_version

#: name -> what it runs; each checked for the right values, not only for not raising.
COLLECTIVES = (
    "all_gather_into_tensor",
    "reduce_scatter_tensor(SUM)",
    "reduce_scatter_tensor(AVG)",
    "all_reduce(SUM)",
    "all_reduce(MAX)",
    "broadcast",
)
OK = "ok"
PROBE_TIMEOUT_S = 240


def _error(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    return " ".join(text.splitlines()[:3])[:400]


def _run_one(name: str, rank: int, world: int, device: str) -> str:
    """One collective on CUDA tensors; "ok" when it ran and gave the right values."""
    import torch
    import torch.distributed as dist

    n = 4
    mine = torch.full((n,), float(rank + 1), device=device)
    if name == "all_gather_into_tensor":
        out = torch.empty(n * world, device=device)
        dist.all_gather_into_tensor(out, mine)
        expected = torch.cat([torch.full((n,), float(r + 1)) for r in range(world)])
    elif name.startswith("reduce_scatter_tensor"):
        op = dist.ReduceOp.AVG if "AVG" in name else dist.ReduceOp.SUM
        full = torch.arange(n * world, dtype=torch.float32, device=device) * (rank + 1)
        out = torch.empty(n, device=device)
        dist.reduce_scatter_tensor(out, full, op=op)
        total = sum(r + 1 for r in range(world)) / (world if op == dist.ReduceOp.AVG else 1)
        expected = torch.arange(rank * n, (rank + 1) * n, dtype=torch.float32) * total
    elif name.startswith("all_reduce"):
        op = dist.ReduceOp.MAX if "MAX" in name else dist.ReduceOp.SUM
        out = mine.clone()
        dist.all_reduce(out, op=op)
        expected = torch.full((n,), float(world if op == dist.ReduceOp.MAX else sum(range(1, world + 1))))
    elif name == "broadcast":
        out = mine.clone()
        dist.broadcast(out, src=0)
        expected = torch.full((n,), 1.0)
    else:
        raise ValueError(f"unknown collective {name!r}")
    torch.cuda.synchronize(device)
    if not torch.equal(out.cpu(), expected):
        return f"wrong values: {out.cpu().tolist()} where {expected.tolist()} was expected"
    return OK


def _rank(rank: int, world: int, init_file: str, results: Any) -> None:
    """A rank: gloo over a file rendezvous, every rank on cuda:0, each collective in turn (a refusal
    raises on every rank alike, before any exchange, so the next one still meets its peers)."""
    import datetime

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    torch.cuda.set_device(0)
    found = {}
    for name in COLLECTIVES:
        try:
            found[name] = _run_one(name, rank, world, "cuda:0")
        except Exception as error:
            found[name] = _error(error)
        dist.barrier()
    results.put((rank, found))
    dist.destroy_process_group()


def probe_gloo_cuda(world_size: int = 2) -> dict[str, str]:
    """Spawn ``world_size`` gloo ranks on cuda:0; per collective "ok" or the first rank's error (no GPU:
    every entry says so)."""
    import torch
    import torch.multiprocessing as mp

    if not torch.cuda.is_available():
        return {name: "no CUDA GPU visible" for name in COLLECTIVES}
    context = mp.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = str(Path(tmp) / "rendezvous")
        ranks = [context.Process(target=_rank, args=(r, world_size, init_file, results)) for r in range(world_size)]
        for process in ranks:
            process.start()
        try:
            found = dict(results.get(timeout=PROBE_TIMEOUT_S) for _ in ranks)
        except queue.Empty:
            return {name: f"no answer from every rank within {PROBE_TIMEOUT_S} s (a rank hung or died)" for name in COLLECTIVES}
        finally:
            for process in ranks:
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()
    merged = {}
    for name in COLLECTIVES:
        errors = [f"rank {r}: {found[r][name]}" for r in sorted(found) if found[r][name] != OK]
        merged[name] = OK if not errors else errors[0]
    return merged


def table(results: dict[str, str]) -> str:
    width = max(map(len, results))
    return "\n".join(f"{name.ljust(width)}  {outcome}" for name, outcome in results.items())


def _cache_path() -> Path:
    key = json.dumps([sys.executable, installed_version("torch"), os.environ.get("CUDA_VISIBLE_DEVICES"),
                      hashlib.sha256(Path(__file__).read_bytes()).hexdigest()])
    return Path(tempfile.gettempdir()) / f"teparity-gloo-cuda-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


@functools.cache
def gloo_cuda_collectives() -> dict[str, str]:
    """``probe_gloo_cuda()`` run once per environment in a subprocess (this process never touches CUDA),
    under a file lock, cached."""
    path = _cache_path()
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return json.loads(path.read_text())
        completed = subprocess.run(
            [sys.executable, "-m", "teparity.stack.collectives"], capture_output=True, text=True,
            timeout=PROBE_TIMEOUT_S + 60, env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        if completed.returncode != 0:
            raise RuntimeError(f"the gloo CUDA collectives probe failed (exit {completed.returncode}):\n"
                               f"{completed.stderr[-4000:]}")
        data = json.loads(completed.stdout.strip().splitlines()[-1])
        path.write_text(json.dumps(data))
        return data


def gloo_cuda_reason(results: dict[str, str] | None = None) -> str | None:
    """Why FSDP cannot run on gloo ranks sharing one GPU: every collective it needs that gloo refuses on
    CUDA tensors, with its error; None when all run."""
    results = gloo_cuda_collectives() if results is None else results
    refused = [f"{name}: {outcome}" for name, outcome in results.items() if outcome != OK]
    if not refused:
        return None
    return (f"gloo ranks sharing one GPU (torch {installed_version('torch')}) cannot run the collectives FSDP needs on "
            f"CUDA tensors: {'; '.join(refused)} (NCCL needs a GPU per rank)")


if __name__ == "__main__":
    print(json.dumps(probe_gloo_cuda()))


#: Set to 1 to run the fsdp tier on gloo ranks sharing one GPU anyway (to measure it again).
FSDP_ON_GLOO_VARIABLE = "TEPARITY_FSDP_ON_GLOO"
#: Measured on one H200 (docs/results/h200-te2.9.0-features/call2-65ae0b1, fsdp-gloo.*): every
#: collective above ran on gloo with CUDA tensors, and still torch FSDP2 did not get through its first step.
FSDP2_GLOO_ONE_GPU = (
    "torch FSDP2 (fully_shard over te.Linear) on 2 gloo ranks sharing one H200 crashed in its first step: rank 0 "
    "died of SIGSEGV in DTensor.full_tensor (torch 2.11.0+cu130, TE 2.9.0, 2026-12-01), although "
    "all_gather_into_tensor, reduce_scatter_tensor, all_reduce and broadcast each ran there on CUDA tensors; the "
    f"fsdp tier needs NCCL, one GPU per rank ({FSDP_ON_GLOO_VARIABLE}=1 runs it on gloo anyway)"
)


def fsdp_backend_reason(backend: str, gpus: int) -> str | None:
    """Why the fsdp tier does not run on this backend, or None: on gloo with a GPU, a collective gloo
    refuses on CUDA tensors (probed), else the FSDP2 crash seen there, unless ``FSDP_ON_GLOO_VARIABLE`` is 1."""
    if backend != "gloo" or not gpus:
        return None
    if reason := gloo_cuda_reason():
        return reason
    return None if os.environ.get(FSDP_ON_GLOO_VARIABLE) == "1" else FSDP2_GLOO_ONE_GPU
