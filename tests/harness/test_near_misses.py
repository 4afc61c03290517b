"""A near miss: a strict test whose failure matches a registered defect's signature outside that entry's
version ranges still fails, and its message and the parity report name the entry, the range that leaves
this stack out, and the bisect that would settle it."""

from __future__ import annotations

import json

import pytest

from teparity.gate import known_defects
from teparity.gate.report import ParityReport
from teparity.stack.versions import Versions

ENTRY = "legacy-executor-loses-te-from-te-2.10"

# This run pretends that a dev build of 0.2.6 is installed: a build before 0.2.6, outside the entry's
# thunder range `>=0.2.6,<0.2.7`. The entry's predicate is the real one minus its environment probe.
_CONFTEST = f"""
import dataclasses
import teparity.gate.known_defects as kd
from teparity.stack.versions import Versions

Versions.installed = classmethod(lambda cls: Versions(torch="2.11.0", thunder="0.2.6.dev20251019", transformer_engine="2.12.0"))
kd.REGISTRY = (dataclasses.replace(kd.BY_ID["{ENTRY}"], matches=lambda ev, env: ev["claimed"] == 0),)
"""

_TESTS = """
import pytest
from teparity.judge.failures import SilentFallback

pytestmark = pytest.mark.parametrize("executor", ["legacy"])

def fallback(claimed):
    raise SilentFallback(f"held {claimed} of 2 linears", executor="legacy", claimed=claimed, linears=2)

@pytest.mark.check("te-claims-every-linear[1proc]")
def test_the_defect_outside_its_range(executor):
    fallback(0)

@pytest.mark.check("numerics[delayed]")
def test_a_look_alike(executor):
    fallback(1)

@pytest.mark.check("bwd-sync-placement[1proc]")
def test_a_check_the_entry_does_not_name(executor):
    fallback(0)
"""


def test_a_near_miss_fails_and_says_which_entry_and_range(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(test_near=_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-report", "r.json")
    result.assert_outcomes(failed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        f"*NearMiss: [[]near miss of known upstream defect {ENTRY}: this failure matches its signature, but thunder "
        "0.2.6.dev20251019 not in `>=0.2.6,<0.2.7` (a build before 0.2.6*so it fails strict*python -m teparity bisect "
        "--package lightning-thunder --good GOOD_BUILD --bad 0.2.6.dev20251019 -- "
        "'test_near.py::test_the_defect_outside_its_range[[]legacy[]]' --runxfail*held 0 of 2 linears",
        f"*te-claims-every-linear[[]1proc[]]*FAIL (1/1; matches {ENTRY} outside its range)*",
    ])
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["exitstatus"] == 1
    tests = {r["check"]: r["tests"][0] for r in data["results"]}
    assert tests["te-claims-every-linear[1proc]"]["near_miss"] == ENTRY
    assert "near miss of known upstream defect" in tests["te-claims-every-linear[1proc]"]["evidence"]
    for check in ("numerics[delayed]", "bwd-sync-placement[1proc]"):
        assert tests[check]["outcome"] == "FAIL" and tests[check]["near_miss"] is None, check
        assert "near miss" not in tests[check]["evidence"], check
    # The report read back keeps the near miss in its cell.
    cell = ParityReport.from_json(data).cells[("te-claims-every-linear[1proc]", "legacy")]
    assert cell.short() == f"FAIL (1/1; matches {ENTRY} outside its range)"


def test_a_te_range_that_leaves_the_stack_out_asks_for_a_te_bisect() -> None:
    entry = known_defects.BY_ID[ENTRY]
    versions = Versions(torch="2.11.0", thunder="0.2.6", transformer_engine="2.9.0")
    assert entry.excluded(versions) == ["TE 2.9.0 not in `>=2.10`"]
    message = known_defects.near_miss_message(entry, versions, "tests/numerics/t.py::t[legacy]")
    assert "--package transformer-engine --wheels DIR --good GOOD_BUILD --bad 2.9.0" in message
    assert entry.excluded(Versions(torch="2.11.0", thunder="0.2.6", transformer_engine="2.12.0")) == []
