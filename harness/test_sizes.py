"""Every module of ``src/teparity`` (the reproductions under ``known/repros`` too) stays a size a maintainer can read:
a module at most ``MODULE_LINES`` lines, a function or method at most ``FUNCTION_LINES``, counted from its ``def`` to
its last line (its decorators not counted, its nested functions counted in it and on their own)."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import REPO

PACKAGE = REPO / "src" / "teparity"
#: A module a maintainer can hold in the head at once; a longer one wants splitting by concept.
MODULE_LINES = 500
#: One job per function; a longer one does several, and its parts want helpers with names of their own.
FUNCTION_LINES = 60
MODULES = sorted(PACKAGE.rglob("*.py"))


def function_lengths(source: str) -> Iterator[tuple[str, int]]:
    """Each function's and method's qualified name (``Class.method``, ``outer.inner``) in ``source`` and its length
    in lines, from its ``def`` to its last line."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{prefix}{child.name}", child.end_lineno - child.lineno + 1
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(source), "")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_is_at_most_module_lines_long(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MODULE_LINES, f"{path.relative_to(REPO)}: {lines} lines, over {MODULE_LINES}: split it by concept"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_function_is_at_most_function_lines_long(path: Path) -> None:
    over = [f"{path.relative_to(REPO)}: {name} is {length} lines, over {FUNCTION_LINES}"
            for name, length in function_lengths(path.read_text()) if length > FUNCTION_LINES]
    assert not over, "functions to split into named helpers:\n" + "\n".join(over)


def test_a_function_is_measured_from_its_def_without_its_decorators_and_nested_ones_on_their_own() -> None:
    source = textwrap.dedent("""
        @decorated
        @twice
        def outer():
            def inner():
                return 1
            return inner

        class Holder:
            async def method(self):
                pass
    """)
    assert list(function_lengths(source)) == [("outer", 4), ("outer.inner", 2), ("Holder.method", 2)]
