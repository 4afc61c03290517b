"""``--teparity-rows``: a run of some report rows alone (what the targeted kill matrix runs per mutant), by the one
row-matching rule of ``teparity.checks`` that the catalog's ``killed_by`` and the registry's entries use too."""

from __future__ import annotations

import pytest

from teparity import checks


@pytest.mark.parametrize(
    ("pattern", "row", "named"),
    [
        ("fsdp[*]", "fsdp[zero2]", True),
        ("fsdp[*]", "fsdp[zero3-block]", True),
        ("fsdp[*]", "fsdp*", False),  # fnmatch's character class [*] would match this row, and only this one
        ("fsdp[*]", "fsdp", False),
        ("fsdp[*]", "fsdp-llama[zero2]", False),
        ("fsdp", "fsdp", True),
        ("fsdp", "fsdp[zero2-layer]", True),
        ("fsdp", "fsdp-llama[zero2]", False),
        ("fsdp", "fsdp-grad-accumulation", False),
        ("numerics[delayed]", "numerics[delayed]", True),
        ("numerics[delayed]", "numerics[delayed-e4m3-len4-max]", False),
        ("numerics[delayed]", "numerics", False),
        ("numerics[d*]", "numerics[delayed]", False),
    ],
)
def test_a_pattern_names_every_parametrization_its_row_or_one_row_and_has_no_other_wildcard(
    pattern: str, row: str, named: bool
) -> None:
    """Checked against: ``fnmatch`` (``fsdp*``, ``numerics[d*]``), a prefix test without the bracket
    (``fsdp-llama``), ``[*]`` also taking the bare row (``fsdp``)."""
    assert checks.matches(pattern, row) is named


def test_patterns_are_split_on_commas_and_one_of_no_check_is_refused() -> None:
    assert checks.patterns("fsdp[*],numerics[delayed], ddp-first-step") == ("fsdp[*]", "numerics[delayed]", "ddp-first-step")
    for bad in ("fsdpx[*]", "fsdp[", "fsdp[*", "fsdp[a]b", "fsdp[a][b]", "fsdp[]", "", "fsdp,"):
        with pytest.raises(ValueError, match=r"names no check .* the checks: bwd-sync-placement, "):
            checks.patterns(bad)


_TESTS = """
import pytest
from teparity import checks

@pytest.mark.parametrize("executor", ["legacy"])
@pytest.mark.parametrize("variant", ["zero2", "zero3"])
@pytest.mark.check(checks.FSDP, "{variant}")
def test_fsdp(executor, variant):
    pass

@pytest.mark.parametrize("executor", ["legacy"])
@pytest.mark.parametrize("variant", ["zero2"])
@pytest.mark.check(checks.FSDP_LLAMA, "{variant}")
def test_fsdp_llama(executor, variant):
    pass

@pytest.mark.parametrize("executor", ["legacy"])
@pytest.mark.check(checks.DDP_FIRST_STEP)
def test_ddp_first_step(executor):
    pass

def test_no_gate_check():
    pass
"""


@pytest.mark.parametrize(
    ("rows", "kept", "deselected"),
    [("fsdp[*]", 2, 3), ("fsdp[zero3],ddp-first-step", 2, 3), ("fsdp", 2, 3), ("fsdp-llama,fsdp", 3, 2)],
)
def test_rows_keep_their_gate_tests_and_the_rest_are_deselected_in_pytests_count(
    pytester: pytest.Pytester, rows: str, kept: int, deselected: int
) -> None:
    """Checked against: the filter dropping items without ``pytest_deselected`` (no count), and keeping the tests
    that are no gate check."""
    pytester.makepyfile(test_gate=_TESTS)
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
                                           f"--teparity-rows={rows}")
    result.assert_outcomes(passed=kept, deselected=deselected)
    said = result.stdout.lines
    assert f"collected 5 items / {deselected} deselected / {kept} selected" in said, said
    assert f"teparity: ONLY THESE ROWS (--teparity-rows; the other tests deselected): {rows.replace(',', ', ')}" in said, said


@pytest.mark.parametrize("rows", ["fsdpx[*]", "fsdp[*],nonesuch", "fsdp[zero2"])
def test_a_pattern_of_no_check_is_a_usage_error_that_names_it_and_the_checks(pytester: pytest.Pytester, rows: str) -> None:
    """Not a silent empty run. Checked against ``checks.patterns`` accepting any name (exit 5, no tests)."""
    pytester.makepyfile(test_gate=_TESTS)
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
                                           f"--teparity-rows={rows}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    bad = next(part for part in rows.split(",") if part != "fsdp[*]")
    said = result.stderr.str()
    assert f"argument --teparity-rows: {bad!r} names no check" in said and f"the checks: {', '.join(checks.ALL)}" in said, said
