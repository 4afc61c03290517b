"""The strategies' registry (``teparity.strategies``), and docs/conventions.md's "Adding a strategy" followed as written:
a toy strategy added to a copy of the package in the three source files the recipe names, and its test written from
step 3. On the CPU the copy's registrations check themselves, a spec names the strategy and gets its rank code, its
world size and skip reason, and the gate collects the test under its report row and skips it for the reason it gives
every test of an FP8 GPU."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from teparity.records import Case, PairSpec
from teparity.stack.reasons import FSDP2_GLOO_ONE_GPU, FSDP_ON_GLOO_VARIABLE
from teparity.strategies import STRATEGIES
from harness import REPO

RECIPE = (REPO / "docs" / "conventions.md").read_text().split("## Adding a strategy", 1)[1].split("\n## ", 1)[0]


def test_a_spec_names_one_strategy_and_sets_only_the_options_it_takes() -> None:
    assert PairSpec("legacy", "delayed", ()).parallel is STRATEGIES["one-rank"]
    with pytest.raises(ValueError, match="unknown strategy 'ddp'"):
        PairSpec("legacy", "delayed", (), strategy="ddp")
    with pytest.raises(ValueError, match="thunder-ddp takes no sharding, bucketing"):
        PairSpec("legacy", "delayed", (), strategy="thunder-ddp", sharding="ZERO2", bucketing="LAYER")
    with pytest.raises(ValueError, match="needs sharding in"):
        PairSpec("legacy", "delayed", (), strategy="thunder-fsdp")
    with pytest.raises(ValueError, match="thunderfx-fsdp2 takes no bucketing"):
        PairSpec("legacy", "delayed", (), strategy="thunderfx-fsdp2", sharding="ZERO3", bucketing="BLOCK")
    with pytest.raises(ValueError, match="compiles with thunderfx, not jit"):
        PairSpec("legacy", "delayed", (), strategy="thunderfx-ddp", compile_path="jit")
    assert PairSpec("legacy", "delayed", (), strategy="thunderfx-ddp").compile_path == "thunderfx"
    assert PairSpec("legacy", "delayed", ()).compile_path == "jit"
    with pytest.raises(ValueError, match="thunderfx-fsdp2 takes no reference"):
        PairSpec("legacy", "delayed", (), strategy="thunderfx-fsdp2", sharding="ZERO3", reference="ddp")
    with pytest.raises(ValueError, match="reference 'deepspeed'"):
        PairSpec("legacy", "delayed", (), strategy="thunder-fsdp", sharding="ZERO2", reference="deepspeed")


def test_the_world_size_and_the_skip_reason_come_from_the_strategy() -> None:
    assert [STRATEGIES[name].world_size(4) for name in ("one-rank", "thunder-ddp", "thunder-fsdp")] == [1, 4, 4]
    here = {"backend": "nccl", "gpus": 2}
    assert STRATEGIES["one-rank"].absent(1, "0.2.6", **here) is None and STRATEGIES["thunder-ddp"].absent(1, "0.2.6", **here) is None
    assert "shards over 2+ ranks; world size is 1 (--teparity-world-size)" in STRATEGIES["thunder-fsdp"].absent(1, "0.2.6", **here)
    assert "predates torch DDP around thunderfx (from 0.2.0.dev20241229)" in STRATEGIES["thunderfx-ddp"].absent(2, "0.2.0.dev20241201", **here)
    assert STRATEGIES["thunderfx-fsdp2"].absent(2, "0.2.0.dev20241229", **here) is None


def test_a_strategy_under_fsdp2_is_absent_where_fsdp2_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch FSDP2 dies of SIGSEGV on gloo ranks sharing a GPU: a strategy whose thunder side it runs skips there (its
    reference has no choice), and a strategy that only takes FSDP2 as a reference falls back to DDP instead."""
    monkeypatch.delenv(FSDP_ON_GLOO_VARIABLE, raising=False)
    fsdp2 = STRATEGIES["thunderfx-fsdp2"]
    assert fsdp2.absent(2, "0.2.6", backend="gloo", gpus=1) == f"torch FSDP2 (fully_shard) around thunderfx: {FSDP2_GLOO_ONE_GPU}"
    assert fsdp2.absent(2, "0.2.6", backend="gloo", gpus=0) is None and fsdp2.absent(2, "0.2.6", backend="nccl", gpus=2) is None
    assert STRATEGIES["thunder-fsdp"].absent(2, "0.2.6", backend="gloo", gpus=1) is None
    monkeypatch.setenv(FSDP_ON_GLOO_VARIABLE, "1")
    assert fsdp2.absent(2, "0.2.6", backend="gloo", gpus=1) is None


def test_a_sharding_strategy_takes_fsdp2_where_it_runs_and_ddp_where_it_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FSDP_ON_GLOO_VARIABLE, raising=False)
    fsdp = STRATEGIES["thunder-fsdp"]
    assert "SIGSEGV" in FSDP2_GLOO_ONE_GPU
    assert [fsdp.reference("gloo", 1), fsdp.reference("nccl", 2), fsdp.reference("gloo", 0)] == ["ddp", "fsdp2", "fsdp2"]
    assert STRATEGIES["thunder-ddp"].reference("gloo", 1) is None
    monkeypatch.setenv(FSDP_ON_GLOO_VARIABLE, "1")
    assert fsdp.reference("gloo", 1) == "fsdp2"


def test_one_eager_run_serves_the_specs_that_differ_only_where_the_eager_side_never_reads() -> None:
    spec = PairSpec("legacy", "delayed", (Case(),), strategy="thunder-fsdp", sharding="ZERO3", bucketing="LAYER", reference="ddp")
    assert fsdp_eager(spec) == fsdp_eager(dataclasses.replace(spec, sharding="ZERO2", bucketing=None))
    assert fsdp_eager(spec).sharding == "ZERO2" and fsdp_eager(spec).bucketing is None
    on_fsdp2 = dataclasses.replace(spec, reference="fsdp2")
    assert fsdp_eager(on_fsdp2).sharding == "ZERO3", "FSDP2 reshards by the spec's sharding: its run is its own"
    one_rank = PairSpec("legacy", "delayed", (Case(),))
    assert STRATEGIES["one-rank"].eager_spec(one_rank) is one_rank


def test_a_sharded_spec_names_its_reference_and_fsdp2_around_thunderfx_has_one() -> None:
    fsdp = PairSpec("legacy", "delayed", (), strategy="thunder-fsdp", sharding="ZERO2", reference="ddp")
    assert fsdp.parallel.sharded_reference(fsdp) == "ddp"
    around = PairSpec("legacy", "delayed", (), strategy="thunderfx-fsdp2", sharding="ZERO2")
    assert around.parallel.sharded_reference(around) == "fsdp2" and around.parallel.reference("gloo", 1) is None
    assert STRATEGIES["one-rank"].sharded_reference(PairSpec("legacy", "delayed", ())) is None


def test_no_tier_test_gives_its_ranks_a_world_size() -> None:
    """A tier's multi-rank runs take their world size from their spec's strategy (``StrategyRanks``): a test that passes
    ``world_size=`` to a runner decides it apart from the strategy that says it."""
    import ast
    from pathlib import Path

    tiers = REPO / "tests"
    given = [f"{path.relative_to(tiers)}:{node.lineno}" for tier in ("trace", "numerics", "features", "ddp", "fsdp")
             for path in sorted((tiers / tier).glob("*.py")) for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and any(keyword.arg == "world_size" for keyword in node.keywords)]
    assert not given, f"tier tests that give their ranks a world size: {given}"


def fsdp_eager(spec: PairSpec) -> PairSpec:
    return spec.parallel.eager_spec(spec)


#: Step 1: the strategy, registered.
STRATEGY = '        Strategy("toy-replicated", "toy_replicated", "every rank training alone", min_ranks=2),\n'
#: Step 2: both sides' rank code (each rank trains the one-rank programs).
MODULE = '''"""Each rank trains the one-rank programs on its own inputs."""

from teparity.inrank.strategies import one_rank


def program(side, plain, spec, group, case, info, recipe):
    return one_rank.program(side, plain, spec, group, case, info, recipe)
'''
#: Step 3: its check, and the test, from teparity.testing alone.
CHECK = 'TOY_REPLICATED = _check("toy-replicated", runs_te=True)\n'
TEST = '''import pytest

from teparity.testing import Case, PairSpec, Pairs, checks

pytestmark = [pytest.mark.fp8, pytest.mark.multirank]


@pytest.mark.parametrize("executor", ["legacy", "functional"])
@pytest.mark.check(checks.TOY_REPLICATED, "{executor}")
def test_toy_replicated_matches_eager_te(executor: str, parity: Pairs) -> None:
    spec = PairSpec(executor, "delayed", (Case(),), steps=2, strategy="toy-replicated")
    pair = parity.run(spec)
    result = parity.judge_against_te_or_model(pair, parity.assert_parity)
    parity.evidence(result.summary())
'''


def test_the_recipe_fits_one_screen_and_names_what_the_toy_strategy_touches() -> None:
    steps = [line for line in RECIPE.strip().splitlines() if line.strip()]
    assert len(steps) <= 15 and max(map(len, steps)) <= 120, "one screen: 15 lines of 120 characters"
    for named in ("src/teparity/strategies.py", "STRATEGIES", "src/teparity/inrank/strategies/<module>.py", "program(side",
                  "src/teparity/checks.py", 'strategy="name"', "parity.run(spec)"):
        assert named in RECIPE, f"the recipe no longer says {named!r}, which the toy strategy follows"


@pytest.mark.timeout(300)
def test_a_toy_strategy_follows_the_recipe_in_three_source_files(package_copy: Any) -> None:
    package_copy.insert("strategies.py", "    )\n}\n", STRATEGY)
    (package_copy.package / "inrank" / "strategies" / "toy_replicated.py").write_text(MODULE)
    package_copy.insert("checks.py", "\n#: Every check, in the order the tiers run them.", "\n" + CHECK.rstrip("\n"))
    (package_copy.root / "tests" / "ddp" / "test_toy_strategy.py").write_text(TEST)
    assert package_copy.changed() == ["checks.py", "inrank/strategies/toy_replicated.py", "strategies.py"]

    probe = package_copy.run("-c", (
        "from teparity.records import Case, PairSpec; from teparity.inrank.strategies import builder\n"
        "spec = PairSpec('legacy', 'delayed', (Case(),), strategy='toy-replicated')\n"
        "print(builder(spec).__module__, spec.parallel.world_size(4), spec.parallel.absent(1, '0.2.6', backend='gloo', gpus=0))"
    ))
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.split("\n")[0] == ("teparity.inrank.strategies.toy_replicated 4 every rank training alone shards over "
                                           "2+ ranks; world size is 1 (--teparity-world-size)"), probe.stdout

    rows, gate = package_copy.gate_rows("tests/ddp/test_toy_strategy.py")
    assert set(rows) == {("toy-replicated[legacy]", "legacy"), ("toy-replicated[functional]", "functional")}, rows
    assert all(outcomes == ["skip"] for outcomes in rows.values()), rows
    assert re.search(r"SKIPPED \[2\] .*: TransformerEngine is not installed", gate.stdout), gate.stdout[-2000:]
