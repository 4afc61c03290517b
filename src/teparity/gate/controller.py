"""The process that starts a run (the xdist controller, or a lone pytest process): it chooses the run's one
fork server, names it to the workers, schedules the tests longest first under ``-n``, and prints the header.
Registered as a plugin there only, as xdist registers its ``DSession``; the processes that run tests have
``teparity.gate.worker``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from teparity.gate import schedule
from teparity.gate.header import header_lines
from teparity.gate.settings import Settings, probed_environment
from teparity.launch import rank_env


class Controller:
    def __init__(self, config: pytest.Config, settings: Settings, rank_env_set: frozenset[str]) -> None:
        self.config, self.settings = config, settings
        #: The rank environment variables this process set (``teparity.launch.rank_env``); the others were given.
        self.rank_env_set = rank_env_set
        #: Why the run has no fork server of its own (each process then starts one), or None.
        self.fork_server_failure: str | None = None
        #: Why the fork server named to this run by the command that started it was not taken, or None.
        self.outer_server_refused: str | None = None
        self._units: Path | None = None
        #: Why the run stopped before it tested anything (``pytest_collection``), or None: the report's ``stopped``.
        self.stopped: str | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Where the run forks its ranks, choose its one fork server now: the one a command that runs pytest
        several times started before this run (``python -m teparity serve``, ``repeat``, ``bench``'s served
        mode), where it fits this run, else one started now, whose imports of torch and TE then overlap
        collection and the environment probe. Every worker forks its ranks from it."""
        config = session.config
        if config.option.collectonly or config.option.help or self.settings.ranks_asked != "forked":
            return
        from teparity.gate.ranks import FORK_PRELOAD
        from teparity.launch.fork_choice import fork_server_for_run
        from teparity.launch.fork_client import FORK_SERVER_VARIABLE

        try:
            self.outer_server_refused = fork_server_for_run(FORK_PRELOAD, config._tmp_path_factory.getbasetemp() / "forkserver")
        except OSError as error:  # each process that forks ranks then starts a server of its own
            os.environ.pop(FORK_SERVER_VARIABLE, None)
            self.fork_server_failure = f"the run's fork server did not start: {type(error).__name__}: {error}"

    @pytest.hookimpl(tryfirst=True)  # before xdist's, which hands the collection to the workers
    def pytest_collection(self, session: pytest.Session) -> None:
        """Stop a run that cannot test (no thunder in this Python) before anything is collected: a usage error, red,
        with what to install, where it would otherwise skip every check and pass. The report still says why."""
        if session.config.option.collectonly or self.settings.allow_no_thunder:
            return
        from teparity.stack import reasons

        if (why := reasons.thunder_absent(probed_environment())) is not None:
            self.stopped = why
            raise pytest.UsageError(f"teparity: {why}")

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        return schedule.make_scheduler(config, log, self.units_folder()) if self.settings.longest_first else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Name to each xdist worker the folder where it writes its tests' shared-run keys for the scheduler."""
        if self.settings.longest_first:
            node.workerinput[schedule.UNITS_INPUT] = str(self.units_folder())

    def units_folder(self) -> Path:
        """The folder for the workers' shared-run keys (``teparity.gate.schedule``), made once."""
        if self._units is None:
            folder = self._units = Path(tempfile.mkdtemp(prefix="teparity-units-"))
            self.config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        return self._units

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        env = probed_environment()
        return header_lines(self.settings, env, self.launch_label(), rank_env.in_force(self.rank_env_set))

    def launch_label(self) -> str:
        """How this run's ranks start, in words (the header's, and the report environment's ``launch``)."""
        mode, fallback = self.settings.ranks
        if fallback:
            return f"warm ranks (not forked: {fallback})"
        if mode != "forked":
            return f"{mode} ranks"
        from teparity.launch import fork_choice

        imports = probed_environment().fork_preload()
        if self.fork_server_failure:
            return f"forked ranks (a fork server per process, each importing {imports}: {self.fork_server_failure})"
        if (server := fork_choice.started_server()) is not None:
            refused = f"; {self.outer_server_refused}" if self.outer_server_refused else ""
            return f"forked ranks (one fork server for the run, pid {server.process.pid}, imports {imports}{refused})"
        if (outer := fork_choice.adopted_server()) is not None:
            standby = (f"; it keeps {outer.standby.count} ranks forked ahead, each having run "
                       f"{outer.standby.prologue} and {outer.standby.warm_up}") if outer.standby else ""
            return (f"forked ranks (the fork server of {outer.owner}, pid {outer.pid}, started before this run and "
                    f"shared with the runs it starts, imports {imports}{standby})")
        return f"forked ranks (one fork server for the run, imports {imports})"
