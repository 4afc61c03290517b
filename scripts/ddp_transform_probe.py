"""Does thunder's DDP transform take an input that requires grad? A diagnosis behind docs/facts.md
(section "thunder's DDP transform and inputs that require grad"), not a gate check; the gate's check is
``ddp-transform-matches-torch-ddp`` in tests/trace/test_ddp_transform.py.

On 2 gloo ranks on the CPU, for each variant (input requiring grad or not, GELU or linears only,
thunder's default bucketing or ``bucket_size_in_mb=0``, the legacy TE executor in the list or thunder's
default executors), it runs teparity's ``ddp_transform_run`` on thunder and on torch DDP and prints one
JSON line: the installed thunder, the variant, and either the error thunder raised or the largest
difference from torch DDP and the distributed symbols of thunder's backward trace (bucketing shows as
``torch_pack_prim_impl`` and friends). Put another thunder build first on PYTHONPATH to probe it.

usage: python3 scripts/ddp_transform_probe.py [--quick]   (--quick: the gate check's variant only)
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from teparity.inrank.scenarios import DdpTransformSpec, ddp_transform_run
from teparity.launch.fresh import run_ranks
from teparity.stack.executors import find_te_executors
from teparity.stack.versions import installed_version


def _max_difference(thunder: list, torch_ddp: list) -> float:
    pairs = [
        (t, e)
        for a, b in zip(thunder, torch_ddp, strict=True)
        for t, e in itertools.chain(
            zip(a.outputs, b.outputs),
            ((t, e) for t, e in zip(a.input_grads, b.input_grads) if e is not None),
            ((g[n], h[n]) for g, h in zip(a.param_grads, b.param_grads) for n in h),
        )
    ]
    return max((t - e).abs().max().item() for t, e in pairs)


def probe(spec: DdpTransformSpec) -> dict:
    thunder = run_ranks(ddp_transform_run, spec, world_size=2, backend="gloo", timeout=300)
    variant = {k: v for k, v in dataclasses.asdict(spec).items() if k in (
        "executor", "activation", "input_requires_grad", "bucket_size_in_mb")}
    line = {"thunder": installed_version("lightning-thunder"), "torch": torch.__version__, **variant}
    errors = [run.error for run in thunder if run.error is not None]
    if errors:
        error = errors[0]
        inner = [f for f in error.functions if f not in ("ddp_transform_run", "_ddp_steps")]
        return {**line, "outcome": "raised", "ranks_raised": len(errors),
                "error": f"{error.type}: {error.message[:240]}", "innermost_functions": inner[-4:]}
    reference = run_ranks(ddp_transform_run, dataclasses.replace(spec, side="torch"), world_size=2, backend="gloo",
                          timeout=300)
    return {**line, "outcome": "ran", "max_abs_difference_from_torch_ddp": _max_difference(thunder, reference),
            "backward_collectives": sorted(set(thunder[0].backward_collectives))}


def main() -> None:
    # Builds without the legacy executor (0.2.7.dev20251130 on) run with thunder's default executors.
    base = DdpTransformSpec(executor="legacy" if find_te_executors()["legacy"].found else None)
    if "--quick" in sys.argv:
        variants = [base]
    else:
        variants = [
            dataclasses.replace(base, executor=executor, input_requires_grad=grad, activation=activation, bucket_size_in_mb=bucket)
            for executor in ("legacy", None)
            for grad in (True, False)
            for activation in ("gelu", None)
            for bucket in (None, 0.0)
        ]
    for spec in variants:
        print(json.dumps(probe(spec)), flush=True)


if __name__ == "__main__":
    main()
