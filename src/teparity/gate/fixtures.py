"""The gate's fixtures: what a tier test asks for (the environment, the world size and backend, the session's
ranks, the ``parity`` object that runs and judges a pair, the evidence line of a pass)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from teparity.gate.report import EVIDENCE_PROPERTY, NUMBERS_PROPERTY
from teparity.gate.settings import probed_environment, settings

if TYPE_CHECKING:
    from teparity.gate.pairs import Pairs
    from teparity.gate.ranks import RankRunner


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


def modeling(entries: list[Any]) -> Any:
    """The entry whose model the test is judged against: the one covering entry with a model, or, where several cover
    it, one that names them all and models them together (``known.defect.combined``)."""
    import dataclasses

    from teparity.known.defect import combined

    with_models = [entry for entry in entries if entry.model is not None]
    if len(with_models) < 2:
        return with_models[0] if with_models else None
    model = combined([entry.model for entry in with_models])
    if alone := next((entry for entry in with_models if entry.model is model), None):
        return alone  # one model stands for all (torch runs every linear)
    return dataclasses.replace(with_models[0], id=_JOINED.join(entry.id for entry in with_models), model=model)


#: How the id of an entry that models several together joins theirs.
_JOINED = " + "


def modeled_ids(entry: Any) -> list[str]:
    """The registry entries whose defects ``modeling``'s entry models."""
    return entry.id.split(_JOINED)


@pytest.fixture
def parity(request: pytest.FixtureRequest, teparity_env: Any, rank_runner: RankRunner, backend: str,
           evidence: Callable[[str], None]) -> Pairs:
    """Run a parity pair (eager TE against thunder + an executor) on the session's ranks and judge it
    (``teparity.gate.pairs.Pairs``); where a known defect with a model covers the test, against that model too."""
    from teparity.gate.known_marks import covering
    from teparity.gate.pairs import Pairs

    modeled_by = modeling(covering(request.node))

    def note(key: str, value: Any) -> None:
        request.node.user_properties.append((key, value))

    return Pairs(teparity_env, rank_runner, backend, evidence, modeled_by, note, settings(request.config).world_size)


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
