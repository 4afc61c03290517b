"""A process that runs tests (an xdist worker, or a lone pytest process): its ranks, started in the background
as soon as it collects a test that needs them; the gate's admission of each test (a system under test that
does not import fails it, what this machine cannot run skips it, saying why); and its teardown. Registered as
a plugin there only; the process that starts the run has ``teparity.gate.controller``."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from teparity.gate import schedule
from teparity.gate.settings import Settings, probed_environment
from teparity.report.parity import REFERENCE_PROPERTY
from teparity.stack import reasons

if TYPE_CHECKING:
    from teparity.gate.ranks import RankRunner
    from teparity.gate.references import ReferenceStore


class Worker:
    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config, self.settings = config, settings
        self._runner: RankRunner | None = None
        self._prestarted = False
        #: The thread that imports torch after collection, joined at the session's end.
        self._importing_torch: threading.Thread | None = None
        self._references: ReferenceStore | None = None

    def reference_store(self) -> ReferenceStore | None:
        """The process's store of reference sides (``--teparity-reference-store``), or None: every one computed. None
        under torchrun, whose processes are the ranks: one that reused a side would leave its peers in its collectives."""
        from teparity.launch.torchrun import torchrun_world

        if self._references is None and self.settings.reference_store is not None and torchrun_world() is None:
            from teparity.gate.references import ReferenceStore, run_name

            self._references = ReferenceStore(Path(self.settings.reference_store), self.settings.fresh_reference,
                                              run_name(probed_environment().versions.thunder), probed_environment().versions.thunder)
            self._references.prune()
        return self._references

    def rank_runner(self) -> RankRunner:
        """The session's one runner (the ``rank_runner`` fixture's, and the one whose ranks start before the
        first test): its launch mode, backend and deadline, work directories under pytest's tmp dir."""
        if self._runner is None:
            from teparity.gate.ranks import rank_runner

            factory = self.config._tmp_path_factory
            self._runner = rank_runner(
                self.settings.ranks[0], self.settings.backend, self.settings.timeout, lambda: factory.mktemp("ranks"),
                concurrent=self.settings.sides == "side-by-side",
            )
        return self._runner

    def pytest_itemcollected(self, item: pytest.Item) -> None:
        """At the first collected test that runs ranks, start its ranks in the background (forked or warm ranks):
        their start-up and prologue then overlap the rest of collection, not the first test."""
        if self._prestarted or "rank_runner" not in getattr(item, "fixturenames", ()) or item.config.option.collectonly:
            return
        self._prestarted = True
        if self.settings.ranks_asked != "fresh":
            self.rank_runner().prestart(self.settings.world_size)

    @pytest.hookimpl(tryfirst=True)  # before an xdist worker reports its collection, which schedules the run
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """In an xdist worker of a longest-first run, write its tests' shared-run keys for the scheduler. Where this
        process started ranks while it collected, import torch now from a thread: its tests judge torch tensors
        from the ranks, and this process waits while the ranks run its first side, so the import overlaps that
        wait instead of the collection (collecting the gate imports no torch)."""
        workerinput = getattr(session.config, "workerinput", {})
        if schedule.UNITS_INPUT in workerinput:
            schedule.write_units(workerinput[schedule.UNITS_INPUT], workerinput["workerid"], session.items)
        if self._prestarted and "torch" not in sys.modules:
            self._importing_torch = threading.Thread(target=importlib.import_module, args=("torch",),
                                                     name="teparity-import-torch", daemon=True)
            self._importing_torch.start()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """Fail every gate test when thunder or TE is installed but does not import, or when this thunder release
        does not support this TE (a gate that cannot test must not pass); skip, before any fixture runs, what
        this machine cannot run, saying what is missing."""
        env = probed_environment()
        if item.get_closest_marker("check"):
            if broken := reasons.import_failure(env):
                pytest.fail(f"the system under test is installed but does not import: {broken}", pytrace=False)
            if unsupported := reasons.unsupported_pair(env):
                pytest.fail(unsupported, pytrace=False)
        if item.get_closest_marker("fp8") and (reason := reasons.no_fp8(env)):
            pytest.skip(reason)
        if item.get_closest_marker("legacy_sync") and (reason := reasons.no_backward_sync(env)):
            pytest.skip(reason)
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """Record in the test's report how each of its reference sides was had (computed, or reused from a run)."""
        if self._references is not None:
            self._references.take_served()
        try:
            return (yield)
        finally:
            if self._references is not None and (served := self._references.take_served()):
                item.user_properties.append((REFERENCE_PROPERTY, served))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """End this process's ranks; under torchrun, leave the process group that the multi-rank tests joined,
        all ranks together."""
        if self._importing_torch is not None:
            self._importing_torch.join(timeout=120)  # not torn down by the interpreter's exit mid-import
        from teparity.gate.ranks import close_all

        close_all()
