"""The package's layers stay layers: a module imports only its own layer and those below it, so the import
graph has no upward arrow and no cycle (docs/design.md, "Layout")."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "teparity"
#: The layers from the ground up: each may import itself and the layers before it ("teparity" is the package's
#: own ``__init__``, which prepares the import order).
LAYERS = (
    ("teparity.stack", "teparity.launch", "teparity.option_types", "teparity.checks"),
    ("teparity.trace_summary", "teparity.records", "teparity.strategies", "teparity.mutations", "teparity"),
    ("teparity.judge", "teparity.inrank"),
    ("teparity.known",),
    ("teparity.gate",),
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
