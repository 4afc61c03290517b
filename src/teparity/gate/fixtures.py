"""The gate's fixtures: what a tier test asks for (the environment, the world size and backend, the session's
ranks, the ``parity`` object that runs and judges a pair, the evidence line of a pass)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from teparity.report.parity import EVIDENCE_PROPERTY, NUMBERS_PROPERTY
from teparity.gate.settings import probed_environment, settings

if TYPE_CHECKING:
    from teparity.gate.pairs import Pairs
    from teparity.gate.ranks import RankRunner, StrategyRanks


@pytest.fixture(scope="session")
def teparity_env() -> Any:
    """The probed ``teparity.stack.environment.Environment``."""
    return probed_environment()


@pytest.fixture(scope="session")
def world_size(request: pytest.FixtureRequest) -> int:
    return settings(request.config).world_size


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    """The process-group backend of the multi-rank tests (``--teparity-backend``)."""
    return settings(request.config).backend


@pytest.fixture(scope="session")
def rank_runner(request: pytest.FixtureRequest) -> RankRunner:
    """``runner(fn, *args, world_size=N)``: the session's ranks (``--teparity-ranks``; torchrun's own processes
    under torchrun), its deadline and backend, work directories under pytest's tmp dir."""
    return request.config.pluginmanager.get_plugin("teparity-worker").rank_runner()


@pytest.fixture(scope="session")
def ranks(request: pytest.FixtureRequest, teparity_env: Any, rank_runner: RankRunner, backend: str) -> StrategyRanks:
    """``ranks(fn, spec)``, ``ranks.side_by_side(calls)``: the session's ranks on the world size of the spec's strategy,
    skipping where it cannot run here (``teparity.gate.ranks.StrategyRanks``)."""
    from teparity.gate.ranks import StrategyRanks

    store = request.config.pluginmanager.get_plugin("teparity-worker").reference_store()
    return StrategyRanks(rank_runner, settings(request.config).world_size, backend, teparity_env, store)


@pytest.fixture
def parity(request: pytest.FixtureRequest, teparity_env: Any, ranks: StrategyRanks, backend: str,
           evidence: Callable[[str], None]) -> Pairs:
    """Run a parity pair (eager TE against thunder + an executor) on the session's ranks and judge it
    (``teparity.gate.pairs.Pairs``); where a known defect with a model covers the test, against that model too."""
    from teparity.gate.known_marks import covering
    from teparity.gate.pairs import Pairs
    from teparity.known.defect import modeling

    modeled_by = modeling(covering(request.node))

    def note(key: str, value: Any) -> None:
        request.node.user_properties.append((key, value))

    return Pairs(teparity_env, ranks, backend, evidence, modeled_by, note)


@pytest.fixture
def numbers(request: pytest.FixtureRequest) -> Callable[[Any], None]:
    """Record what a comparison outside ``parity`` compared (tensors, largest differences, rules) for the report."""
    from teparity.gate.pairs import comparison_numbers

    def record(result: Any) -> None:
        request.node.user_properties.append((NUMBERS_PROPERTY, comparison_numbers(result)))

    return record


@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Record a one-line evidence summary for the parity report (what a pass rests on)."""

    def record(summary: str) -> None:
        request.node.user_properties.append((EVIDENCE_PROPERTY, summary))

    return record
