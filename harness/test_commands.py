"""The README's gate command as users type it: a report or base path after its option either as ``--opt=PATH`` or
as ``--opt PATH``, run twice (the second time the report exists), from the checkout's root and from another folder
(naming the checkout's tests), with the path inside or outside the checkout.

pytest reads an existing path after an option it does not know yet as a test path and places its rootdir by it, before
any conftest can load the plugin that knows the option (pytest-dev/pytest#8846). The gate's commands name the folder
of the tiers, so that the rootdir, the ini file and the plugin are the checkout's whatever paths follow."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness import REPO
from teparity.report.parity import ParityReport


def _readme_gate_command() -> list[str]:
    """The README's first command's pytest part (what CI runs verbatim), with this interpreter."""
    first = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("python3 -m venv"))
    words = shlex.split(first.split("&& ", 2)[-1])
    assert words[1:3] == ["-m", "pytest"], words
    return [sys.executable, *words[1:]]


@pytest.mark.parametrize("form", ["--opt PATH", "--opt=PATH"])
@pytest.mark.parametrize("where", ["inside", "outside"])
@pytest.mark.parametrize("cwd", ["root", "elsewhere"])
def test_the_readmes_gate_command_takes_its_paths_in_either_form(form: str, where: str, cwd: str, tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(dir=REPO, prefix=".paths-")) if where == "inside" else tmp_path
    try:
        report, base = folder / "report.json", folder / "base.json"
        ParityReport(environment={}).write(base)
        command = _readme_gate_command()
        if cwd == "elsewhere":  # the checkout's tests named from another folder
            command = [str(REPO / word) if (REPO / word).is_dir() else word for word in command]
        options = [("--teparity-report", report), ("--teparity-base", base)]
        args = [part for name, path in options for part in ((name, str(path)) if form == "--opt PATH" else (f"{name}={path}",))]
        for attempt in ("report absent", "report present"):
            done = subprocess.run([*command, *args, "--collect-only", "-q"], cwd=REPO if cwd == "root" else tmp_path,
                                  capture_output=True, text=True, timeout=300)
            said = f"{attempt}, {cwd}, {where}, {form}: exit {done.returncode}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
            nodes = [line for line in done.stdout.splitlines() if "::" in line]
            assert done.returncode == 0 and nodes, said
            assert all(node.startswith("tests/") for node in nodes), said  # the checkout's rootdir, its tiers alone
            report.write_text("{}")
    finally:
        if where == "inside":
            for path in folder.iterdir():
                path.unlink()
            folder.rmdir()
