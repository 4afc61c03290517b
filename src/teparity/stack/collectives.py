"""Whether the fsdp tier can run on this backend, and the probe behind that answer.

The fsdp tier needs, on CUDA tensors, what thunder's FSDP and torch's FSDP2 issue: ``all_gather_into_tensor``
(parameters), ``reduce_scatter_tensor`` (gradients; FSDP2 with ``ReduceOp.AVG`` for fp32/bf16, thunder
with SUM after a pre-division), ``all_reduce`` (TE's amax reduction, MAX) and ``broadcast``.
``probe_gloo_cuda`` runs each on 2 gloo ranks sharing cuda:0 (``scripts/gloo_cuda_collectives_probe.py``
prints its table on a GPU host): with torch 2.11.0 all of them run, and still torch FSDP2 crashed there,
so on gloo with a GPU the tier takes torch DDP as its reference instead, with that evidence
(``teparity.stack.reasons.fsdp_backend_unfit``), without probing again.
"""

from __future__ import annotations

import queue
import tempfile
from pathlib import Path
from typing import Any

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
