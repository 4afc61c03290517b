"""The package's layers stay layers: the launchers know no test policy, and the judges read records
without the code that runs in ranks (docs/design.md, "Layout")."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "teparity"
#: layer -> the teparity modules (prefixes) it may import.
ALLOWED = {
    "launch": ("teparity.launch",),
    "judge": ("teparity.judge", "teparity.records", "teparity.trace_summary", "teparity.stack"),
    "stack": ("teparity.stack",),
    "mutations": ("teparity.mutations", "teparity.stack"),
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
    for plain_data in ("records.py", "trace_summary.py"):
        assert {m for m in teparity_imports(PACKAGE / plain_data) if not m.startswith(("teparity.stack", "teparity.trace_summary"))} == set()


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
