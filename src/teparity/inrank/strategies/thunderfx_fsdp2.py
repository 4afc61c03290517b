"""torch FSDP2 (``fully_shard``, one unit: the root) around a module that thunderfx then compiles, as thunder's
benchmark_litgpt ``fsdp2`` mode shards a one-block model (a linear sharded on its own is a unit whose hooks break
Dynamo's graph there, and thunder gets no linear: docs/facts.md), against torch FSDP2 over the ``te.Linear`` twins
(``thunder_fsdp.eager_reference``): the strategy is absent wherever FSDP2 cannot run, so its reference is always FSDP2.
thunder sees the gathered parameters of each FSDP2 unit; its gradients are ``DTensor`` shards, made whole to compare."""

from __future__ import annotations

from typing import Any

from teparity.inrank import networks
from teparity.inrank.fsdp_transform import fully_shard_network
from teparity.inrank.program import Program, compile_thunder, eager_module, thunder_network, thunder_options, thunder_program
from teparity.inrank.strategies.thunder_fsdp import eager_reference, fsdp2_no_sync, full_tensor, mesh, sharded
from teparity.records import Case, PairSpec, Side
from teparity.stack.executors import ExecutorInfo


def program(side: Side, plain: Any, spec: PairSpec, group: Any, case: Case, info: ExecutorInfo, recipe: Any) -> Program:
    if side == "eager":
        return sharded(eager_reference(eager_module(plain, spec, group, case), spec, group))
    network = fully_shard_network(networks.Whole(thunder_network(plain, spec)), spec.sharding, mesh=mesh(), per_linear=False)
    compiled = compile_thunder(network, thunder_options(spec, info, recipe), spec)
    return sharded(thunder_program(compiled, plain, spec, group, no_sync=fsdp2_no_sync(network), full=full_tensor))
