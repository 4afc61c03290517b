"""Every dotted teparity name that a docstring or comment of ``src/teparity`` or ``tests`` mentions exists: a module
(``teparity.report.parity``, or relative, ``report.parity``) or a name its module defines or imports
(``teparity.known.registry.BY_ID``). A docstring naming a module that has moved or a class that was renamed sends its
reader looking for something that is not there, and nothing else would notice. The check reads the source files and
imports nothing, so modules that need TransformerEngine or a GPU are checked like any other. Only dotted names are
checked: paths written with slashes (``report/parity.py``) and names of other packages (``torch.distributed``) are not."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from harness import REPO

PACKAGE = REPO / "src" / "teparity"
#: teparity's subpackages and top-level modules: a dotted name that starts with one of them is a teparity name.
TOPS = sorted({path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
              | {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()})
#: ``teparity.<...>`` or ``gate.<...>``, not preceded by a word, dot or slash: not ``torch.testing.x`` or ``a/gate.x``.
DOTTED = re.compile(rf"(?<![\w./-])(?:teparity|{'|'.join(TOPS)})(?:\.\w+)+")
#: A module of a subpackage named alone and its attribute in double backquotes, ``versions.FSDP_SHARDING``: the name
#: must be bound by a module of that name somewhere in the package.
NESTED = {path.stem for path in PACKAGE.rglob("*.py") if path.parent != PACKAGE and path.stem != "__init__"} - set(TOPS)
QUOTED = re.compile(rf"``((?:{'|'.join(sorted(NESTED))})\.(?!(?:json|toml|md|py|txt|log|sh)``)[A-Za-z_]\w*)``")


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """Each line of the docstrings (module, class, function) and each comment of a source file, with its number."""
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        documented = isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        if documented and (doc := ast.get_docstring(node, clean=False)):
            yield from enumerate(doc.splitlines(), start=node.body[0].lineno)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def _module(parts: list[str]) -> Path | None:
    """The source file of the module ``teparity.<parts>``, if there is one."""
    path = PACKAGE.joinpath(*parts)
    return next((file for file in (path.with_suffix(".py"), path / "__init__.py") if file.is_file()), None)


@cache
def _defined(module: Path) -> frozenset[str]:
    """The names a module's source binds anywhere in it: ``def``, ``class``, assignments and annotations, imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return frozenset(names)


def resolves(name: str) -> bool:
    """Whether ``name`` (``teparity.`` optional, a ``.py`` ending allowed) is a module, or a module and a name that
    its source binds: the longest module prefix, then its first attribute (later ones, that object's own, are not
    checked)."""
    parts = name.removesuffix(".py").split(".")
    parts = parts[1:] if parts[0] == "teparity" else parts
    for length in range(len(parts), -1, -1):
        if (module := _module(parts[:length])) is not None:
            return length == len(parts) or parts[length] in _defined(module)
    return False


def nested_resolves(name: str) -> bool:
    """Whether ``module.NAME`` names something a module of that name (in any subpackage) binds."""
    stem, attribute = name.split(".", 1)
    return any(attribute.split(".")[0] in _defined(path) for path in PACKAGE.rglob(f"{stem}.py"))


def test_every_teparity_name_in_a_docstring_or_comment_exists() -> None:
    unresolved = [f"{path.relative_to(REPO)}:{line}: {match.group()}"
                  for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "tests").rglob("*.py")])
                  for line, text in _texts(path) for match in DOTTED.finditer(text) if not resolves(match.group())]
    unresolved += [f"{path.relative_to(REPO)}:{line}: {match.group(1)}"
                   for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "tests").rglob("*.py")])
                   for line, text in _texts(path) for match in QUOTED.finditer(text) if not nested_resolves(match.group(1))]
    assert not unresolved, "names that no module defines:\n" + "\n".join(unresolved)


def test_a_subpackage_module_named_alone_with_a_name_it_lacks_is_caught() -> None:
    assert not nested_resolves("versions.FSDP_SHARDING") and nested_resolves("thunder_api.FSDP_SHARDING")
    assert QUOTED.search("(``versions.FSDP_SHARDING``)")
