"""The package's layers stay layers: the launchers know no test policy, and the judges read records
without the code that runs in ranks (docs/design.md, "Layout")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "teparity"
#: layer -> the teparity modules (prefixes) it may import.
ALLOWED = {
    "launch": ("teparity.launch",),
    "judge": ("teparity.judge", "teparity.records", "teparity.stack"),
    "stack": ("teparity.stack",),
}


def teparity_imports(path: Path) -> set[str]:
    """Every ``teparity...`` module a file imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("teparity"):
            found |= {f"{node.module}.{a.name}" if node.module == "teparity" else node.module for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("teparity")}
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_what_lies_below_it(layer: str) -> None:
    files = sorted((PACKAGE / layer).glob("*.py"))
    assert files, f"no modules under {PACKAGE / layer}"
    wrong = {
        f"{path.name}: {module}"
        for path in files
        for module in teparity_imports(path)
        if not module.startswith(ALLOWED[layer])
    }
    assert not wrong, f"teparity.{layer} imports outside {ALLOWED[layer]}: {sorted(wrong)}"


def test_the_records_import_no_rank_code() -> None:
    assert not {m for m in teparity_imports(PACKAGE / "records.py") if m.startswith(("teparity.inrank", "teparity.launch"))}
