"""The declared version matrix: ``matrix.toml`` at the repository's root names every stack (torch, TE, thunder)
that teparity claims: the GPU stacks, each a TE release with thunder builds on the GPU host's torch, and the CPU stacks,
each a torch with thunder builds and no TE. A change to judging is done when every one of them is green (docs/conventions.md);
``python -m teparity run-matrix`` runs them (``teparity.tools.matrix_run``)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: The declared matrix of a checkout (an installed teparity has none: name one with ``--matrix``).
DEFAULT = Path(__file__).resolve().parents[3] / "matrix.toml"


class MatrixFileError(Exception):
    """The matrix file cannot be used; the message names the file and what is wrong, in one line."""


@dataclasses.dataclass(frozen=True)
class Stack:
    torch: str
    #: The TE release; None for a CPU stack (no TE).
    te: str | None
    thunder: str

    @property
    def name(self) -> str:
        """The stack's name in file names and tables: ``te2.9.0-th0.2.6``; a CPU stack's ``cpu-torch2.12.1-th0.2.6``."""
        return f"te{self.te}-th{self.thunder}" if self.te else f"cpu-torch{self.torch}-th{self.thunder}"


def read(path: Path = DEFAULT) -> tuple[Stack, ...]:
    """The stacks ``path`` declares, in its order: each ``[[te]]`` table's release with each of its thunder builds."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as error:
        raise MatrixFileError(f"{path}: cannot read it: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise MatrixFileError(f"{path}: not TOML: {error}") from None
    return _stacks(path, data)


def _stacks(path: Path, data: dict[str, Any]) -> tuple[Stack, ...]:
    def fail(what: str) -> MatrixFileError:
        return MatrixFileError(f"{path}: {what}")

    if unknown := sorted(set(data) - {"torch", "te", "cpu"}):
        raise fail(f"unknown key(s) {', '.join(unknown)}: the file has 'torch', [[te]] and [[cpu]] tables only")
    torch = _version(data.get("torch"), "torch", fail)
    tables = data.get("te")
    if not isinstance(tables, list) or not tables:
        raise fail("no [[te]] table: declare at least one TE release with its thunder builds")
    stacks: list[Stack] = []
    for number, table in enumerate(tables, 1):
        where = f"[[te]] table {number}"
        if unknown := sorted(set(table) - {"version", "thunder"}):
            raise fail(f"{where}: unknown key(s) {', '.join(unknown)}: a [[te]] table has 'version' and 'thunder'")
        te = _version(table.get("version"), f"{where}'s version", fail)
        builds = table.get("thunder")
        if not isinstance(builds, list) or not builds:
            raise fail(f"{where} (TE {te}): 'thunder' must be a non-empty list of lightning-thunder versions")
        for build in builds:
            stack = Stack(torch, te, _version(build, f"{where} (TE {te}): a thunder build", fail))
            if stack in stacks:
                raise fail(f"{where}: thunder {build} with TE {te} is declared twice")
            stacks.append(stack)
    return tuple(stacks) + _cpu_stacks(data.get("cpu", []), fail)


def _cpu_stacks(tables: Any, fail: Any) -> tuple[Stack, ...]:
    """The ``[[cpu]]`` tables' stacks: each torch of a table with each of its thunder builds, no TE."""
    if not isinstance(tables, list):
        raise fail("'cpu' must be [[cpu]] tables, each with 'torch' and 'thunder' lists")
    stacks: list[Stack] = []
    for number, table in enumerate(tables, 1):
        where = f"[[cpu]] table {number}"
        if unknown := sorted(set(table) - {"torch", "thunder"}):
            raise fail(f"{where}: unknown key(s) {', '.join(unknown)}: a [[cpu]] table has 'torch' and 'thunder'")
        torches, builds = table.get("torch"), table.get("thunder")
        if not isinstance(torches, list) or not torches or not isinstance(builds, list) or not builds:
            raise fail(f"{where}: 'torch' and 'thunder' must be non-empty lists of versions")
        for torch in torches:
            for build in builds:
                stack = Stack(_version(torch, f"{where}: a torch", fail), None, _version(build, f"{where}: a thunder build", fail))
                if stack in stacks:
                    raise fail(f"{where}: thunder {build} with torch {torch} is declared twice")
                stacks.append(stack)
    return tuple(stacks)


def _version(value: Any, what: str, fail: Any) -> str:
    if not isinstance(value, str):
        raise fail(f"{what} must be a version string, got {value!r}")
    try:
        Version(value)
    except InvalidVersion:
        raise fail(f"{what}: {value!r} is not a version") from None
    return value
