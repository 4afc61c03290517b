"""thunder's TE executors as found in the installed thunder: where each lives, whether it exists and runs,
and what its module says about itself (its backward sync, its TE imports, its fp8 group).

Executors, by thunder release (docs/facts.md):

==========================  ==============================================  ==================================
thunder                     legacy (module-based, backward-sync symbol)     functional (per-linear amax update)
==========================  ==============================================  ==================================
0.1.0 .. 0.2.5              ``transformer_engineex.transformer_engine_ex``  0.2.3 .. 0.2.5: opt-in
                                                                            ``transformer_engine_v2ex``
0.2.6                       ``transformer_engine_v1ex``                     ``transformer_engineex`` (default)
0.2.7.dev20251130 on        removed (thunder PR #2762)                      ``transformer_engineex``
==========================  ==============================================  ==================================

The modules are found by probing in that order and recognized by what they define (``TELinear`` for
the legacy executor, a ``TransformerEngineTransform*`` class for the functional one), so weekly builds
between releases are handled without a table of dates.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import Any, Literal

from teparity.stack import since
from teparity.stack.symbols import BACKWARD_SYNC_SYMBOL, SYNC_INSERTION_HELPER
from teparity.stack.versions import build_version, installed_version

ExecutorKind = Literal["legacy", "functional"]


EXECUTOR_KINDS: tuple[ExecutorKind, ...] = ("legacy", "functional")


# (module, executor attribute, marker attribute) in probing order.
_LEGACY_CANDIDATES = (
    ("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
    ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear"),
)


_FUNCTIONAL_CANDIDATES = (
    ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
    ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2"),
)


@dataclasses.dataclass(frozen=True)
class ExecutorInfo:
    """One of thunder's TE executors as found in the installed thunder (plain data: travels as JSON)."""

    kind: ExecutorKind
    module: str | None = None
    attribute: str | None = None
    #: The transform class the functional executor needs (``thunder.jit(transforms=[...])``).
    transform: str | None = None
    #: Whether the executor object exists (the functional one is None without TE).
    executor_present: bool = False
    #: Legacy only: whether this build has the backward-sync symbol and its insertion helper.
    has_backward_sync: bool = False
    #: Why this thunder has no such executor at all (None when the module was found).
    missing_reason: str | None = None
    #: Legacy only, TE installed: why the module's own TE imports failed (its ``TE_AVAILABLE`` is False,
    #: so its checker declines every linear: a silent fallback the TE-claims checks report), or None.
    te_imports_failed: str | None = None
    #: Legacy only: the module flag that must be true for this build to insert its backward sync, where
    #: it is false here (0.2.0.dev20240513 .. dev20240602 insert it only ``if TE_VERSION_1_6_PLUS``, i.e.
    #: with TE > 1.6, and reorder the TE linears otherwise), or None.
    backward_sync_gate_off: str | None = None
    #: Whether the executor reduces amaxes within ``fp8_autocast(fp8_group=...)`` (read in its source:
    #: legacy, its autocast wrapper passes a group; functional, its update asks TE for the group).
    honors_fp8_group: bool = False

    @property
    def found(self) -> bool:
        return self.module is not None

    def label(self) -> str:
        if not self.found:
            return f"{self.kind}: none ({self.missing_reason})"
        where = f"{self.module}.{self.attribute}"
        state = "" if self.executor_present else " [executor is None: TE not importable]"
        sync = f", {BACKWARD_SYNC_SYMBOL}" if self.has_backward_sync else ""
        failed = f" [TE_AVAILABLE is False: {self.te_imports_failed}]" if self.te_imports_failed else ""
        return f"{self.kind}: {where}{sync}{state}{failed}"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _import_optional(module_name: str) -> Any | None:
    try:
        return importlib.import_module(module_name)
    except ImportError:
        return None


def find_te_executors() -> dict[ExecutorKind, ExecutorInfo]:
    """Locate thunder's TE executors by importing thunder (call in a probe or a rank, not in plugin import)."""
    thunder_version = build_version("lightning-thunder")
    found: dict[ExecutorKind, ExecutorInfo] = {}
    for kind, candidates in (("legacy", _LEGACY_CANDIDATES), ("functional", _FUNCTIONAL_CANDIDATES)):
        for module_name, attribute, marker in candidates:
            module = _import_optional(module_name)
            if module is None or not hasattr(module, marker):
                continue
            found[kind] = ExecutorInfo(
                kind=kind,
                module=module_name,
                attribute=attribute,
                transform=marker if kind == "functional" else None,
                executor_present=getattr(module, attribute, None) is not None,
                has_backward_sync=kind == "legacy"
                and hasattr(module, BACKWARD_SYNC_SYMBOL)
                and hasattr(module, SYNC_INSERTION_HELPER),
                te_imports_failed=_te_imports_failed(module) if kind == "legacy" else None,
                backward_sync_gate_off=_backward_sync_gate_off(module) if kind == "legacy" else None,
                honors_fp8_group=_honors_fp8_group(kind, module_name, module),
            )
            break
        else:
            found[kind] = ExecutorInfo(
                kind=kind, missing_reason=absent(kind, thunder_version)
            )
    return found


def _honors_fp8_group(kind: ExecutorKind, module_name: str, module: Any) -> bool:
    if kind == "legacy":
        return "fp8_group" in getattr(module, "TE_CTX_STR", "")
    impl = implementation_module(module_name)
    return impl is not None and "get_fp8_group" in inspect.getsource(impl)


def _backward_sync_gate_off(module: Any) -> str | None:
    """The flag of an ``if FLAG:`` that guards the legacy module's call of its sync-insertion helper and
    is false in this module, or None (read from the source of the function that calls the helper)."""
    import ast
    import textwrap

    caller = getattr(module, "_transformer_engine_bwd_fp8_meta_sync", None)
    if caller is None:
        return None
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(caller)))):
        if (
            isinstance(node, ast.If) and isinstance(node.test, ast.Name)
            and any(SYNC_INSERTION_HELPER in ast.unparse(statement) for statement in node.body)
            and not getattr(module, node.test.id, False)
        ):
            return node.test.id
    return None


def implementation_module(module_name: str) -> Any | None:
    """The functional executor's ``<module>_impl``, which holds its operators and its per-linear update
    (it imports TE: None without it)."""
    return _import_optional(f"{module_name}_impl")


def _te_imports_failed(module: Any) -> str | None:
    """The legacy module's own TE import failure (it catches it, warns once and sets TE_AVAILABLE =
    False), found by running its TE import statements again: the warning is gone when thunder imported
    the module before anyone listened."""
    if getattr(module, "TE_AVAILABLE", True) is not False or installed_version("transformer_engine") is None:
        return None
    return _replay_te_imports(module) or "TE_AVAILABLE is False although the module's TE imports succeed (a version gate?)"


def _replay_te_imports(module: Any) -> str | None:
    """Run the import statements of the module's ``try`` blocks that import TransformerEngine, in order;
    the first that raises, with its error, or None."""
    import ast

    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(node, ast.Try):
            continue
        imports = [s for s in node.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        if not any("transformer_engine" in ast.unparse(s) for s in imports):
            continue
        for statement in imports:
            try:
                exec(compile(ast.Module([statement], type_ignores=[]), module.__file__ or "<module>", "exec"), {})
            except Exception as error:
                return f"{ast.unparse(statement)}: {type(error).__name__}: {error}"
    return None


def executor_module(info: ExecutorInfo) -> Any:
    """The imported module of a found executor."""
    if info.module is None:
        raise LookupError(f"no {info.kind} TE executor: {info.missing_reason}")
    return importlib.import_module(info.module)


def absent(kind: ExecutorKind, thunder: str | None) -> str:
    """Why this thunder has no executor of ``kind`` at all."""
    why = {
        "legacy": f"the legacy TE executor was removed in {since.LEGACY_EXECUTOR_REMOVED_IN} (thunder PR #2762)",
        "functional": f"the functional TE executor first shipped in {since.FUNCTIONAL_EXECUTOR_SINCE} (transformer_engine_v2ex)",
    }[kind]
    return f"lightning-thunder {thunder} has none: {why}"
