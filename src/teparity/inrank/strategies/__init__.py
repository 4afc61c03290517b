"""The rank code of each strategy (``teparity.strategies.STRATEGIES``), a module apiece: ``program(side, plain, spec,
group, case, executor, recipe)`` builds one side's ``teparity.inrank.program.Program`` from that module's parts, and
``teparity.inrank.sides``' one step loop trains it."""

from __future__ import annotations

import importlib

from teparity.inrank.program import Builder
from teparity.records import PairSpec


def builder(spec: PairSpec) -> Builder:
    """The program builder of the spec's strategy."""
    return importlib.import_module(f"{__name__}.{spec.parallel.module}").program
