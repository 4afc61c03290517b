"""The rank code of each strategy (``teparity.strategies.STRATEGIES``), a module apiece: ``program(side, plain, spec,
group, case, executor, recipe)`` builds one side's ``sides.Program``, which ``sides``' one step loop trains."""

from __future__ import annotations

import importlib

from teparity.inrank.sides import Builder
from teparity.records import PairSpec


def builder(spec: PairSpec) -> Builder:
    """The program builder of the spec's strategy."""
    return importlib.import_module(f"{__name__}.{spec.parallel.module}").program
