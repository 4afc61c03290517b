"""Registrations that check themselves: each check's properties (``teparity.checks``, said where it is defined) against
what its tests do, the registry's "executor loses TE" entries against the checks that run TE, and the mutation
catalog's killers against the checks."""

from __future__ import annotations

import ast
from pathlib import Path

from teparity import checks
from teparity.known.registry import BY_ID
from teparity.mutations.catalog import CATALOG
from harness import REPO

GATE_TIERS = ("trace", "numerics", "features", "ddp", "fsdp")
LOSES_TE = ("legacy-executor-loses-te-from-te-2.10", "functional-executor-loses-te-from-te-2.10")


def _marks(node: ast.AST) -> set[str]:
    """The ``pytest.mark.NAME`` names inside ``node``."""
    return {sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark"}


def _named_checks(node: ast.AST) -> list[str]:
    return [getattr(checks, sub.attr) for sub in ast.walk(node) if isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name) and sub.value.id == "checks"]


def _checks_marked(decorator: ast.expr, module: ast.Module) -> list[str]:
    """The checks a ``@pytest.mark.check(...)`` decorator names: ``checks.<NAME>``, or, for a function of the test's
    parameters, the checks in the module-level tables it reads."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) and decorator.func.attr == "check"):
        return []
    first = decorator.args[0]
    if not isinstance(first, ast.Lambda):
        return _named_checks(first)
    read = {sub.id for sub in ast.walk(first.body) if isinstance(sub, ast.Name)}
    return [check for node in module.body if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in read for t in node.targets) for check in _named_checks(node.value)]


def te_running_tests(source: str) -> dict[str, bool]:
    """Per check a test module marks: whether its tests run TE linears (marked ``fp8``, for an FP8 GPU, or judged by
    the ``parity`` fixture, which runs eager TE)."""
    module = ast.parse(source)
    module_fp8 = any("fp8" in _marks(node.value) for node in module.body if isinstance(node, ast.Assign)
                     and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets))
    found: dict[str, bool] = {}
    for node in module.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        runs_te = module_fp8 or any("fp8" in _marks(d) for d in node.decorator_list) or \
            any(arg.arg == "parity" for arg in node.args.args)
        for check in (c for d in node.decorator_list for c in _checks_marked(d, module)):
            found[check] = found.get(check, False) or runs_te
    return found


def undeclared(found: dict[str, bool]) -> list[str]:
    """The checks whose ``runs_te`` property says otherwise than their tests."""
    return [f"{check}: its tests {'run' if runs else 'run no'} TE linears, its definition says runs_te="
            f"{checks.REGISTRY[check].runs_te}" for check, runs in found.items() if checks.REGISTRY[check].runs_te != runs]


def _gate_checks_running_te() -> dict[str, bool]:
    found: dict[str, bool] = {}
    for tier in GATE_TIERS:
        for path in sorted((REPO / "tests" / tier).glob("test_*.py")):
            for check, runs in te_running_tests(path.read_text()).items():
                found[check] = found.get(check, False) or runs
    return found


def test_a_check_says_it_runs_te_exactly_where_its_tests_run_te_linears() -> None:
    found = _gate_checks_running_te()
    assert set(found) == set(checks.ALL), "every check has a test, every test's check is registered"
    assert not undeclared(found)


def test_a_check_whose_tests_run_te_but_that_does_not_say_so_is_named() -> None:
    """The mutation of the check above: an FP8-tier test of a check declared without ``runs_te``."""
    toy = ("import pytest\nfrom teparity import checks\npytestmark = pytest.mark.fp8\n\n"
           "@pytest.mark.check(checks.DDP_TRANSFORM)\ndef test_toy(parity):\n    pass\n")
    assert undeclared(te_running_tests(toy)) == [
        "ddp-transform-matches-torch-ddp: its tests run TE linears, its definition says runs_te=False"]


def test_the_executor_loses_te_entries_cover_every_check_that_runs_te() -> None:
    """A check that runs TE linears but escapes these entries turns red, not known, on TE 2.10 and later."""
    for entry_id in LOSES_TE:
        assert set(checks.TE_RUNS) <= {checks.base(c) for c in BY_ID[entry_id].checks}, entry_id


def test_every_mutation_is_killed_by_checks_that_exist() -> None:
    for mutation in CATALOG.values():
        assert mutation.killed_by and mutation.kill_note, mutation.name
        unknown = [row for row in mutation.killed_by if checks.base(row) not in checks.ALL]
        assert not unknown, f"{mutation.name} names no check: {unknown}"
