"""torch DDP around a module that thunderfx compiles (``thunderfx(DistributedDataParallel(module))``, as thunder's
benchmark_litgpt ``ddp`` mode with a Dynamo backend: Dynamo breaks the graph at DDP's forward and hands thunder the
module's, ``networks.Whole``) against torch DDP + eager TE. Both sides reduce gradients with torch DDP's
own reducer, and a micro-batch without the reduction is DDP's ``no_sync`` on both."""

from __future__ import annotations

from typing import Any

from teparity.inrank import networks
from teparity.inrank.program import Program, compile_thunder, eager_module, eager_program, thunder_network, thunder_options, thunder_program, torch_ddp
from teparity.records import Case, PairSpec, Side
from teparity.stack.executors import ExecutorInfo


def program(side: Side, plain: Any, spec: PairSpec, group: Any, case: Case, info: ExecutorInfo, recipe: Any) -> Program:
    if side == "eager":
        built = eager_program(eager_module(plain, spec, group, case), spec, group, ddp=False)
        built.network = torch_ddp(built.network)
        built.no_sync = built.network.no_sync
        return built
    ddp = torch_ddp(networks.Whole(thunder_network(plain, spec)))
    return thunder_program(compile_thunder(ddp, thunder_options(spec, info, recipe), spec), plain, spec, group,
                           no_sync=ddp.no_sync)
