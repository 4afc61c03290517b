"""The package's layers stay layers: a module imports only its own layer and those below it, so the import
graph has no upward arrow, and no two modules need each other, on one floor either (docs/design.md, "Layout")."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from harness import REPO

PACKAGE = REPO / "src" / "teparity"
#: The layers from the ground up: each may import itself and the layers before it ("teparity" is the package's
#: own ``__init__``, which prepares the import order).
LAYERS = (
    ("teparity.stack", "teparity.launch", "teparity.option_types", "teparity.checks", "teparity.reportfile"),
    ("teparity.trace_summary", "teparity.records", "teparity.strategies", "teparity.mutations", "teparity"),
    ("teparity.judge", "teparity.inrank"),
    ("teparity.known",),
    ("teparity.gate", "teparity.report"),
    ("teparity.plugin", "teparity.tools", "teparity.testing"),
    ("teparity.cli", "teparity.__main__"),
)
#: What a layer's own modules may not import of each other although they share a floor: the launchers know
#: no test policy and the stack knows no launcher, the judges read records without the code that runs in ranks, and
#: the code that runs in ranks depends on no judge.
APART = {
    "teparity.stack": ("teparity.launch", "teparity.option_types", "teparity.checks"),
    "teparity.launch": ("teparity.stack", "teparity.option_types", "teparity.checks"),
    "teparity.judge": ("teparity.inrank",),
    "teparity.inrank": ("teparity.judge",),
    "teparity.trace_summary": ("teparity.records", "teparity.mutations"),
    "teparity.records": ("teparity.mutations",),
    "teparity.strategies": ("teparity.records", "teparity.mutations"),
    "teparity.report": ("teparity.gate",),
}


def _layer_of(module: str) -> tuple[int, str]:
    for floor, parts in enumerate(LAYERS):
        for part in parts:
            if module == part or (part != "teparity" and module.startswith(part + ".")):
                return floor, part
    raise AssertionError(f"{module} is in no layer of test_layers.LAYERS")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def teparity_imports(path: Path) -> set[str]:
    """Every ``teparity...`` module a file imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("teparity"):
            found |= {f"{node.module}.{a.name}" if node.module == "teparity" else node.module for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("teparity")}
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def module_imports(path: Path, package: Path) -> set[str]:
    """The modules of ``package`` that a file imports, at module level, inside functions or for type checking alone:
    ``from a.b import c`` is module ``a.b.c`` where that is a module of the package, else ``a.b``."""
    root = package.name
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == root:
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                found.add(inner if _is_module(inner, package) else node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == root}
    return found


def _is_module(name: str, package: Path) -> bool:
    relative = Path(*name.split(".")[1:])
    return (package / relative).with_suffix(".py").is_file() or (package / relative / "__init__.py").is_file()


def import_circles(package: Path) -> list[list[str]]:
    """Every set of two or more modules of ``package`` that reach each other through imports (the strongly
    connected components of the import graph, by Tarjan's algorithm), each sorted, and a module importing itself."""
    names = {_module_name_in(path, package): path for path in sorted(package.rglob("*.py"))}
    graph = {name: sorted(module_imports(path, package) & names.keys()) for name, path in names.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for imported in graph[name]:
            if imported not in index:
                visit(imported)
                low[name] = min(low[name], low[imported])
            elif imported in stack:
                low[name] = min(low[name], index[imported])
        if low[name] == index[name]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == name:
                    break
            if len(component) > 1 or name in graph[name]:
                circles.append(sorted(component))

    for name in names:
        if name not in index:
            visit(name)
    return circles


def _module_name_in(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_its_layer_and_those_below(path: Path) -> None:
    module = _module_name(path)
    floor, part = _layer_of(module)
    wrong = []
    for imported in teparity_imports(path):
        their_floor, their_part = _layer_of(imported)
        if their_floor > floor or their_part in APART.get(part, ()):
            wrong.append(f"{imported} ({their_part}, floor {their_floor + 1})")
    assert not wrong, f"{module} (floor {floor + 1}) imports upward or across: {sorted(wrong)}"


def test_no_two_modules_need_each_other() -> None:
    """A layer test that passes while two modules import each other says less than it seems: a circle is one concept
    cut in two, or a shared part that belongs below both."""
    circles = import_circles(PACKAGE)
    assert not circles, "modules that import each other (directly or round a circle): " + "; ".join(
        " <-> ".join(circle) for circle in circles)


def test_a_circle_is_found_at_any_depth_and_through_type_checking_imports(tmp_path: Path) -> None:
    """The finder itself: a circle through a ``TYPE_CHECKING`` import and a function's import, one of three modules,
    and a clean package."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name, text in {
        "__init__.py": "", "sub/__init__.py": "",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "b.py": "def f():\n    from pkg import a\n",
        "sub/c.py": "from pkg.sub import d\n", "sub/d.py": "import pkg.sub.e\n", "sub/e.py": "from pkg.sub.c import x\n",
        "clean.py": "from pkg import a\n",
    }.items():
        (package / name).write_text(text)
    assert sorted(import_circles(package)) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d", "pkg.sub.e"]]
    (package / "b.py").write_text("")
    assert sorted(import_circles(package)) == [["pkg.sub.c", "pkg.sub.d", "pkg.sub.e"]]


def test_every_module_lies_in_a_layer() -> None:
    assert MODULES and all(_layer_of(_module_name(path)) for path in MODULES)


def test_collecting_the_gate_imports_no_torch() -> None:
    """An xdist worker collects every test before its first one runs: torch's import (3-5 s on an H200 host)
    there would hold back every worker's first test. The judges import it where they compare; the plugin
    imports it from a thread once collection is done, while the ranks run their first side."""
    root = PACKAGE.parents[1]
    script = textwrap.dedent("""
        import sys, pytest
        class Seen:
            def pytest_collection_finish(self, session):
                print("torch imported:", "torch" in sys.modules, len(session.items), "tests")
        sys.exit(pytest.main(["--co", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "tests/trace", "tests/numerics",
                              "tests/features", "tests/ddp", "tests/fsdp"], plugins=[Seen()]))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "torch imported: False" in done.stdout, done.stdout[-2000:]


def test_the_tier_tests_import_teparity_from_its_testing_module() -> None:
    """A test author reads one module, ``teparity.testing``, as numpy's read ``numpy.testing``."""
    tiers = PACKAGE.parents[1] / "tests"
    elsewhere = [f"{path.relative_to(tiers)}:{node.lineno} {node.module}" for tier in ("trace", "numerics", "features", "ddp", "fsdp")
                 for path in sorted((tiers / tier).glob("*.py")) for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("teparity")
                 and node.module != "teparity.testing"]
    assert not elsewhere
