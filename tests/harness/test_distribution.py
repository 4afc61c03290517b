"""Under ``-n`` the gate distributes by work stealing unless the user picked a ``--dist``."""

from __future__ import annotations

import pytest

_SAY_DIST = "def pytest_report_header(config):\n    return f'dist mode: {config.option.dist}'\n"


@pytest.mark.parametrize(
    ("args", "mode"),
    [
        (("-n", "2"), "worksteal"),
        (("-n", "2", "--dist", "load"), "load"),
        ((), "no"),
    ],
)
def test_work_stealing_is_the_default_under_n(pytester: pytest.Pytester, args: tuple[str, ...], mode: str) -> None:
    pytester.makeconftest(_SAY_DIST)
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-ranks=warm", *args)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"dist mode: {mode}"])
