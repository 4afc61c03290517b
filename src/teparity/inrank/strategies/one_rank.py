"""One rank: eager TE (or a defect model of it) against thunder + the executor, compiled by the spec's path."""

from __future__ import annotations

from typing import Any

from teparity.inrank.program import Program, compile_thunder, eager_module, eager_program, thunder_network, thunder_options, thunder_program
from teparity.records import Case, PairSpec, Side
from teparity.stack.executors import ExecutorInfo


def program(side: Side, plain: Any, spec: PairSpec, group: Any, case: Case, info: ExecutorInfo, recipe: Any) -> Program:
    if side == "eager":
        return eager_program(eager_module(plain, spec, group, case), spec, group, ddp=False)
    compiled = compile_thunder(thunder_network(plain, spec), thunder_options(spec, info, recipe), spec)
    return thunder_program(compiled, plain, spec, group)
