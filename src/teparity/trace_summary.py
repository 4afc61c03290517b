"""A thunder trace as plain data: one row per bound symbol (index, name, role, first printed line, the
proxies it reads and writes). Ranks reduce their traces to a ``TraceSummary`` and send it back; the judges
(``teparity.judge.traces``) read only summaries, so a check reads the same in one process and on several
ranks, on every thunder build. The return is found by ``PrimIDs.RETURN`` (``return`` in 2024 builds,
``python_return`` later), never by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Literal

from teparity.stack.symbols import BACKWARD_SYNC_SYMBOL, CUDA_GRAPH_REGION_PREFIX

Role = Literal["return", "backward_sync", "grad_wait", "all_reduce", "other"]

#: Executed-trace names of thunder's distributed wait / all-reduce (torch executor implementations
#: of ``thunder.distributed.prims.wait`` / ``all_reduce``) and of the prims themselves.
_WAIT_NAMES = frozenset({"torch_wait_prim_impl", "wait"})
_ALL_REDUCE_NAMES = frozenset({"torch_all_reduce_prim_impl", "all_reduce"})


@dataclasses.dataclass(frozen=True)
class SymbolRow:
    index: int
    name: str
    role: Role
    text: str
    #: Names of the proxies the symbol reads (args and kwargs, flattened; None arguments left out) and
    #: writes: the data flow that the FP8-state invariants follow.
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class TraceSummary:
    """A trace as plain data: picklable across ranks, comparable, printable."""

    label: str
    rows: tuple[SymbolRow, ...]

    def indices(self, role: Role) -> list[int]:
        return [row.index for row in self.rows if row.role == role]

    def count(self, role: Role) -> int:
        return len(self.indices(role))


def is_distributed(name: str) -> bool:
    """A thunder torch-executor collective, wait or bucket helper (``torch_*_prim_impl``)."""
    return name.startswith("torch_") and name.endswith("_prim_impl")


def _role(bsym: Any) -> Role:
    from thunder.core.prims import PrimIDs

    sym = bsym.sym
    if sym.id == PrimIDs.RETURN:
        return "return"
    if sym.name == BACKWARD_SYNC_SYMBOL or sym.id == BACKWARD_SYNC_SYMBOL:
        return "backward_sync"
    if sym.name in _WAIT_NAMES:
        return "grad_wait"
    if sym.name in _ALL_REDUCE_NAMES:
        return "all_reduce"
    return "other"


def _first_line(bsym: Any) -> str:
    try:
        lines = str(bsym).strip().splitlines()
    except Exception as error:  # printing a symbol must never hide the evidence of the others
        return f"<unprintable: {type(error).__name__}>"
    return (lines[0] if lines else "")[:140]


def _proxy_names(proxies: Iterable[Any]) -> tuple[str, ...]:
    return tuple(name for proxy in proxies if isinstance(name := getattr(proxy, "name", None), str))


def _program_symbols(bsyms: Iterable[Any]) -> Iterable[Any]:
    """The trace's symbols in order, a CUDA graph region followed by the symbols it holds: they are the program's (its
    TE linears, syncs and updates), only captured in a graph."""
    for bsym in bsyms:
        yield bsym
        if bsym.sym.name.startswith(CUDA_GRAPH_REGION_PREFIX):
            yield from bsym.subsymbols


def summarize(trace: Any, label: str) -> TraceSummary:
    """Reduce a thunder ``TraceCtx`` to a ``TraceSummary``."""
    rows = tuple(
        SymbolRow(
            index=i, name=bsym.sym.name, role=_role(bsym), text=_first_line(bsym),
            inputs=_proxy_names(bsym.flat_proxy_args), outputs=_proxy_names(bsym.flat_proxy_outs),
        )
        for i, bsym in enumerate(_program_symbols(trace.bound_symbols))
    )
    return TraceSummary(label=label, rows=rows)
