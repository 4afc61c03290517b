"""docs/conventions.md's "Adding a feature check", followed as written: a toy check with a new network, added to a copy
of the package in the three source files the recipe names, and its test written from step 3. On the CPU the copy's
registrations check themselves, the network's linears are found at any depth, and the gate collects the test under
its report row and skips it for the reason it gives every test of an FP8 GPU."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from harness import REPO

RECIPE = (REPO / "docs" / "conventions.md").read_text().split("## Adding a feature check", 1)[1].split("\n## ", 1)[0]

#: Step 1: the check, named where the checks are.
CHECK = 'TOY_RESIDUAL = _check("toy-residual", runs_te=True)\n'
#: Step 2: the network's architecture and its builder (linears two deep: a nested module).
ARCHITECTURE = '        Architecture("toy", "toy_residual", label_prefix="toy"),\n'
BUILDER = '''

class _Residual(torch.nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Linear(width, hidden, bias=False), torch.nn.Linear(hidden, width, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.inner(x)


def toy_residual(sizes: tuple[int, ...], *, seed: int = 0, device: str = "cpu", dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(_Residual(sizes[0], sizes[1])).to(device=device, dtype=dtype)
'''
#: Step 3: the test, from teparity.testing alone.
TEST = '''import pytest

from teparity.testing import Case, PairSpec, Pairs, checks

pytestmark = pytest.mark.fp8


@pytest.mark.parametrize("executor", ["legacy", "functional"])
@pytest.mark.check(checks.TOY_RESIDUAL, "{executor}")
def test_toy_residual_matches_eager_te(executor: str, parity: Pairs) -> None:
    spec = PairSpec(executor, "delayed", (Case(sizes=(32, 64, 32), architecture="toy"),), steps=2)
    pair = parity.run(spec)
    result = parity.judge_against_te_or_model(pair, parity.assert_parity)
    parity.evidence(result.summary())
'''


def test_the_recipe_fits_one_screen_and_names_what_the_toy_check_touches() -> None:
    steps = [line for line in RECIPE.strip().splitlines() if line.strip()]
    assert len(steps) <= 30 and max(map(len, steps)) <= 120, "one screen: 30 lines of 120 characters"
    for named in ("src/teparity/checks.py", "_check(", "runs_te=True", "ARCHITECTURES", "src/teparity/records.py",
                  "src/teparity/inrank/networks.py", "teparity.testing", "@pytest.mark.check(", "parity.run(spec)",
                  "parity.judge_against_te_or_model(pair, parity.assert_parity)", "parity.evidence("):
        assert named in RECIPE, f"the recipe no longer says {named!r}, which the toy check follows"


@pytest.mark.timeout(300)
def test_a_toy_check_with_a_new_network_follows_the_recipe_in_three_source_files(package_copy: Any) -> None:
    pytest.importorskip("torch")
    package = package_copy.package
    package_copy.insert("checks.py", "\n#: Every check, in the order the tiers run them.", "\n" + CHECK.rstrip("\n"))
    package_copy.insert("records.py", "    )\n}\n", ARCHITECTURE)
    (package / "inrank" / "networks.py").write_text((package / "inrank" / "networks.py").read_text() + BUILDER)
    (package_copy.root / "tests" / "features" / "test_toy_parity.py").write_text(TEST)
    assert package_copy.changed() == ["checks.py", "inrank/networks.py", "records.py"]

    probe = package_copy.run("-c", (
        "from teparity import checks; from teparity.inrank import networks; from teparity.records import Case\n"
        "from teparity.known import registry; from teparity.stack.versions import Versions\n"
        "case = Case(sizes=(32, 64, 32), architecture='toy')\n"
        "covered = [e.id for e in registry.covering('toy-residual', 'legacy', Versions(torch='2.11.0', thunder='0.2.6', "
        "transformer_engine='2.12.0'))]\n"
        "print(checks.TOY_RESIDUAL in checks.TE_RUNS, case.label(), networks.linear_names(networks.toy_residual(case.sizes)), covered)"
    ))
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.split() == ["True", "toy-32-64-32/in16x32/float32", "['0.inner.0',", "'0.inner.1']",
                                    "['legacy-executor-loses-te-from-te-2.10']"], probe.stdout

    rows, gate = package_copy.gate_rows("tests/features/test_toy_parity.py")
    assert set(rows) == {("toy-residual[legacy]", "legacy"), ("toy-residual[functional]", "functional")}, rows
    assert all(outcomes == ["skip"] for outcomes in rows.values()), rows
    assert re.search(r"SKIPPED \[2\] .*: TransformerEngine is not installed", gate.stdout), gate.stdout[-2000:]
