"""Where do thunder ddp's and torch DDP's gradients part, with N NCCL ranks? A diagnosis behind
docs/facts.md, not a gate check.

``collect`` (a GPU host with TE and thunder; N GPUs) runs step 0 of the DDP tier's first case four ways
(eager TE and thunder + the legacy executor, each without DDP: the local gradients, and with DDP, one
all-reduce per gradient) and saves every rank's gradients. ``analyze`` (anywhere) says, per parameter,
whether the two sides' local gradients are equal, and how many elements of each side's reduced gradient
are a bf16 sum of that side's local gradients / N in some rank order.

usage: python3 scripts/allreduce_probe.py collect N FILE.pt
       python3 scripts/allreduce_probe.py analyze FILE.pt
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from teparity.inrank.sides import run_eager, run_thunder
from teparity.launch.fresh import run_ranks
from teparity.records import Case, PairSpec

CASE = Case(activation=None, dtype="bfloat16")
Grads = list[dict[str, torch.Tensor]]  # per rank: parameter name -> step-0 gradient


def collect(world: int, path: str) -> None:
    base = PairSpec("legacy", "delayed", (CASE,), steps=1, ddp=False)
    runs: dict[str, Grads] = {}
    for side, run_side in (("eager", run_eager), ("thunder", run_thunder)):
        for ddp in (False, True):
            spec = dataclasses.replace(base, ddp=ddp)
            by_rank = run_ranks(run_side, spec, world_size=world, backend="nccl", timeout=300)
            runs[f"{side}-{'ddp' if ddp else 'local'}"] = [r[0].steps[0].param_grads for r in by_rank]
    torch.save({"world": world, "runs": runs}, path)


def _sums_in_some_order(parts: list[torch.Tensor]) -> list[torch.Tensor]:
    sums = []
    for order in itertools.permutations(range(len(parts))):
        total = parts[order[0]]
        for rank in order[1:]:
            total = (total + parts[rank]).to(torch.bfloat16)
        sums.append(total)
    return sums


def analyze(path: str) -> None:
    data = torch.load(path)
    world, runs = data["world"], data["runs"]
    for name in runs["eager-ddp"][0]:
        n = runs["eager-ddp"][0][name].numel()
        line = [f"{name} ({n} elements)"]
        local_equal = all(torch.equal(runs["eager-local"][r][name], runs["thunder-local"][r][name]) for r in range(world))
        line.append(f"local grads equal on every rank: {local_equal}")
        line.append(f"reduced eager==thunder on rank 0: {int((runs['eager-ddp'][0][name] == runs['thunder-ddp'][0][name]).sum())}")
        for side in ("eager", "thunder"):
            parts = [(runs[f"{side}-local"][r][name].to(torch.bfloat16) / world).to(torch.bfloat16) for r in range(world)]
            reduced = runs[f"{side}-ddp"][0][name].to(torch.bfloat16)
            some_order = torch.zeros_like(reduced, dtype=torch.bool)
            for total in _sums_in_some_order(parts):
                some_order |= reduced == total
            line.append(f"{side} reduced = a bf16 sum of its local grads / {world}: {int(some_order.sum())}")
        print("; ".join(line), flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    collect(int(args[0]), args[1]) if command == "collect" else analyze(args[0])
