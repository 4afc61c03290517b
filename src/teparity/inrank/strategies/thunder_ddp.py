"""thunder's DDP (``thunder.distributed.ddp`` of ``thunder.jit``) against torch DDP + eager TE, whose gradient
accumulation is thunder's (``teparity.inrank.accumulation.ThunderStyleAccumulation``)."""

from __future__ import annotations

from typing import Any

from teparity.inrank.accumulation import thunder_no_sync
from teparity.inrank.program import Program, eager_module, eager_program, thunder_network, thunder_options, thunder_program
from teparity.records import Case, PairSpec, Side
from teparity.stack.executors import ExecutorInfo
from teparity.stack.thunder_api import jit_ddp


def program(side: Side, plain: Any, spec: PairSpec, group: Any, case: Case, info: ExecutorInfo, recipe: Any) -> Program:
    if side == "eager":
        return eager_program(eager_module(plain, spec, group, case), spec, group, ddp=True)
    compiled = jit_ddp(thunder_network(plain, spec), thunder_options(spec, info, recipe))
    return thunder_program(compiled, plain, spec, group, no_sync=thunder_no_sync(compiled))
