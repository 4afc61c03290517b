"""The gate's checks are named once (``teparity.checks``): every gate test marks its row with a constant from
there, and every constant is some test's row."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from teparity import checks
from harness import REPO



def _collected_rows() -> set[str]:
    """The report rows of the gate's tests, as the plugin names them at collection."""
    script = (
        "import sys, pytest\n"
        "from teparity.gate.known_marks import row_of\n"
        "class Rows:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        print('ROWS', sorted({row_of(item)[0] for item in session.items if row_of(item)}))\n"
        "sys.exit(pytest.main(['--co', '-q', '-p', 'no:xdist', '-p', 'no:cacheprovider'], plugins=[Rows()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    line = next(line for line in done.stdout.splitlines() if line.startswith("ROWS "))
    return set(eval(line[5:]))  # a printed list of strings


def test_every_check_is_a_row_of_the_gate_and_every_row_a_check() -> None:
    rows = _collected_rows()
    assert {checks.base(row) for row in rows} == set(checks.ALL)
    assert len(checks.ALL) == len(set(checks.ALL))


def test_a_row_names_its_check_and_its_parameter_part() -> None:
    assert checks.row(checks.NUMERICS, "delayed") == "numerics[delayed]" and checks.row(checks.DDP) == "ddp"
    assert checks.base("numerics[delayed]") == checks.NUMERICS


def test_every_killed_by_of_the_catalog_names_rows_the_gate_has() -> None:
    """A ``killed_by`` pattern that names no row of the gate would send every targeted run of its mutant to the whole
    gate (``kill-matrix --targeted``). Checked against an entry's ``fsdp-grad-accumulation[*]`` made
    ``fsdp-grad-accumulation[zero4]``."""
    from teparity.mutations.catalog import CATALOG

    rows = _collected_rows()
    unmatched = {name: pattern for name, mutation in CATALOG.items() for pattern in mutation.killed_by
                 if not any(checks.matches(pattern, row) for row in rows)}
    assert not unmatched, unmatched
