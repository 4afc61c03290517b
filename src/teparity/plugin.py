"""The teparity pytest plugin: options, markers, the report header, skips with reasons, the parity report.

Imports no torch, thunder or TE at module import (``--help``, collection and the xdist controller stay
fast and never touch CUDA); what the machine can run comes from the cached environment probe.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from teparity.gate import loggers, schedule
from teparity.gate.report import EVIDENCE_CHARS, ParityReport, TestOutcome
from teparity.gate.timeline import Timeline, process_started
from teparity.known import registry as known_defects
from teparity.known.defect import KnownDefect, NearMiss
from teparity.launch import rank_env
from teparity.mutations import catalog as mutations
from teparity.stack import reasons
from teparity.stack.versions import Versions

if TYPE_CHECKING:
    from teparity.gate.pairs import Pairs
    from teparity.gate.ranks import RankRunner

_PROPERTY = "teparity"
_EVIDENCE = "teparity_evidence"
#: The registry entries that cover an item on the installed stack (see pytest_collection_modifyitems).
_KNOWN = pytest.StashKey[list[KnownDefect]]()
_MATCHED = "teparity_known_defect"
_NEAR_MISS = "teparity_near_miss"


def positive(kind: type[int | float]) -> Callable[[str], Any]:
    """An option type that refuses values below or at zero with a usage error (not a failing test)."""

    def parse(text: str) -> Any:
        import argparse

        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("teparity", "teparity: thunder + TransformerEngine parity gate")
    group.addoption(
        "--teparity-timeout",
        type=positive(float),
        default=180.0,
        help="harness deadline in seconds for a multi-rank run; hung ranks are stack-dumped and killed "
        "(default 180; the process-group timeout is min(60, this / 2))",
    )
    group.addoption(
        "--teparity-world-size",
        type=positive(int),
        default=None,
        help="ranks for the multi-rank tests (default: torchrun's WORLD_SIZE under torchrun, else 2)",
    )
    group.addoption(
        "--teparity-backend",
        choices=("auto", "gloo", "nccl"),
        default="auto",
        help="process-group backend of multi-rank tests: auto = NCCL with one GPU per rank when there are "
        "enough GPUs, else gloo (ranks share one GPU or the CPU)",
    )
    group.addoption(
        "--teparity-ranks",
        choices=("forked", "warm", "fresh"),
        default="forked",
        help="forked: warm ranks forked from the run's one fork server, which imported torch and TE (and thunder and "
        "inductor's compiler where the probe found fork still works after them) once for the controller and every "
        "xdist worker (where forking works here, else warm, and the header says why); warm: each pytest process keeps its spawned ranks between "
        "runs (reset between sides; a pool that saw a failure is discarded); fresh: new processes for every "
        "side (default forked)",
    )
    group.addoption(
        "--teparity-sides",
        choices=("serial", "side-by-side"),
        default="serial",
        help="serial: the sides a test compares (eager TE and thunder, thunder's transform and torch's) run one "
        "after the other on the same ranks; side-by-side: at once, each on forked or warm ranks of its own (twice "
        "the rank processes and CUDA contexts), so a test costs its longer side (default serial; fresh ranks and "
        "torchrun are always serial)",
    )
    group.addoption("--teparity-report", metavar="PATH", help="write the parity report as JSON to PATH")
    group.addoption(
        "--teparity-inject",
        metavar="NAME",
        action="append",
        default=[],
        choices=sorted(mutations.CATALOG),
        help="apply a known regression from teparity.mutations in every process, ranks included "
        "(repeatable; the gate is expected to fail)",
    )


#: Set on a run under ``-n`` without ``--dist``: its tests are scheduled longest first.
_LONGEST_FIRST = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Any:
    """Under ``-n N`` with no ``--dist``, schedule the tests longest first (``teparity.gate.schedule``): a
    gate test takes 0.01 s (a skip) to about 30 s, and xdist's ``load`` left one worker of 12 with 42 s of
    rank work where the mean was 28 s (docs/results/h200-te2.20.2-sixth/README.md, call1). Runs before
    xdist's own hook (a wrapper runs before every plain implementation), which turns an unset ``--dist``
    into ``load``; an explicit ``--dist`` is kept."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "no":
        config.option.dist = "load"
        config.stash[_LONGEST_FIRST] = True
    return (yield)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.stash.get(_LONGEST_FIRST, False):
        return schedule.make_scheduler(config, log, _units_folder(config))
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Name to each xdist worker the folder where it writes its tests' shared-run keys for the scheduler."""
    if node.config.stash.get(_LONGEST_FIRST, False):
        node.workerinput[schedule.UNITS_INPUT] = str(_units_folder(node.config))


_UNITS = pytest.StashKey[Path]()


def _units_folder(config: pytest.Config) -> Path:
    """The controller's folder for the workers' shared-run keys (``teparity.gate.schedule``), made once."""
    if _UNITS not in config.stash:
        import shutil
        import tempfile

        folder = config.stash[_UNITS] = Path(tempfile.mkdtemp(prefix="teparity-units-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    return config.stash[_UNITS]


def pytest_configure(config: pytest.Config) -> None:
    loggers.snapshot_logger_registry()  # before any thread of this process imports while tests run
    for line in (
        "check(name): the parity-report row this test feeds; {param} fields are filled from the test's parameters",
        "fp8: needs TransformerEngine and an FP8-capable GPU (sm_89+); skipped otherwise, with the reason",
        "legacy_sync: needs thunder's legacy TE executor with its backward sync; skipped otherwise, with the reason",
        "multirank: spawns ranks with torch.distributed",
        f"{schedule.MARKER}(key): tests with one key share a rank run (under -n they go to one worker, so that it runs "
        "once); key is a format string over the test's parameters, or a callable of them",
    ):
        config.addinivalue_line("markers", line)
    if injected := config.getoption("teparity_inject"):
        os.environ[mutations.ENV_VAR] = ",".join(injected)
    global _rank_env_set
    _rank_env_set = rank_env.apply_defaults()
    _register_hypothesis_profiles()
    if not hasattr(config, "workerinput"):
        from teparity.stack.envprobe import new_run

        new_run()  # before the workers start: they inherit the run's probe
        config.pluginmanager.register(ParityReporter(config), "teparity-parity-reporter")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave quickly: what exists at exit is frozen out of the interpreter's last garbage collection, which
    took about 1 s once torch and thunder were imported; an xdist run ends only once its workers have exited
    (docs/facts.md, "Standby ranks, shared runs, a process's exit"). Every exit handler still runs."""
    atexit.register(gc.freeze)


def pytest_sessionstart(session: pytest.Session) -> None:
    """In the process that starts a run with forked ranks (the xdist controller, or a lone pytest), choose
    the run's one fork server now: the one a command that runs pytest several times started before this run
    (``python -m teparity serve``, ``repeat``, ``bench``'s served mode), where it fits this run, else one
    started now, whose imports of torch and TE then overlap collection and the environment probe. Every
    worker forks its ranks from it (``teparity.launch.forkserver``)."""
    global _fork_server_failure, _outer_server_refused
    config = session.config
    if config.option.collectonly or config.option.help:
        return
    if config.getoption("teparity_ranks") != "forked" or hasattr(config, "workerinput"):
        return
    from teparity.gate.ranks import FORK_PRELOAD
    from teparity.launch.forkserver import FORK_SERVER_VARIABLE
    from teparity.launch.pool import fork_server_for_run

    try:
        _outer_server_refused = fork_server_for_run(FORK_PRELOAD, config._tmp_path_factory.getbasetemp() / "forkserver")
    except OSError as error:  # each process that forks ranks then starts a server of its own
        os.environ.pop(FORK_SERVER_VARIABLE, None)
        _fork_server_failure = f"the run's fork server did not start: {type(error).__name__}: {error}"


def pytest_itemcollected(item: pytest.Item) -> None:
    """At the first collected test that runs ranks, in a process that runs tests (an xdist worker, a lone
    pytest), start its ranks in the background (forked or warm ranks): their start-up and prologue then
    overlap the rest of collection, not the first test."""
    config = item.config
    if (_PRESTARTED not in config.stash and "rank_runner" in getattr(item, "fixturenames", ())
            and not config.option.collectonly and not config.pluginmanager.has_plugin("dsession")):
        config.stash[_PRESTARTED] = True
        if config.getoption("teparity_ranks") != "fresh":
            _rank_runner(config).prestart(_world_size(config))


_PRESTARTED = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)  # before an xdist worker reports its collection, which schedules the run
def pytest_collection_finish(session: pytest.Session) -> None:
    """In an xdist worker of a longest-first run, write its tests' shared-run keys for the scheduler. Where this
    process started ranks while it collected, import torch now from a thread: its tests judge torch tensors
    from the ranks, and this process waits while the ranks run its first side, so the import overlaps that
    wait instead of the collection (collecting the gate imports no torch)."""
    workerinput = getattr(session.config, "workerinput", {})
    if schedule.UNITS_INPUT in workerinput:
        schedule.write_units(workerinput[schedule.UNITS_INPUT], workerinput["workerid"], session.items)
    if session.config.stash.get(_PRESTARTED, False) and "torch" not in sys.modules:
        import importlib
        import threading

        global _importing_torch
        _importing_torch = threading.Thread(target=importlib.import_module, args=("torch",), name="teparity-import-torch",
                                            daemon=True)
        _importing_torch.start()


#: The thread that imports torch after collection (``pytest_collection_finish``), joined at the session's end.
_importing_torch: Any = None


#: Why the run has no fork server of its own (each process then starts one), or None.
_fork_server_failure: str | None = None
#: Why the fork server named to this run by the command that started it was not taken, or None.
_outer_server_refused: str | None = None
#: The rank environment variables that this process set (``teparity.launch.rank_env``); the others were given.
_rank_env_set: frozenset[str] = frozenset()


def _register_hypothesis_profiles() -> None:
    from hypothesis import HealthCheck, settings

    common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    settings.register_profile("dev", max_examples=20, **common)
    settings.register_profile("ci", max_examples=30, derandomize=True, database=None, print_blob=True, **common)
    settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("TEPARITY_HYPOTHESIS_PROFILE", "dev"))


def _environment() -> Any:
    from teparity.stack.envprobe import environment

    return environment()


def te_settings() -> dict[str, str]:
    """The ``NVTE_*`` variables of this run: they change TE's numerics (``NVTE_UNFUSED_FP8_UPDATE``
    swaps the fused scale update for the Python one), so a report that omits them misleads."""
    return {name: value for name, value in sorted(os.environ.items()) if name.startswith("NVTE_")}


def pytest_report_header(config: pytest.Config) -> list[str]:
    env = _environment()
    gpus = ", ".join(g.describe() for g in env.gpus) or "none"
    lines = [
        f"teparity: {env.versions.describe()}",
        f"teparity: GPUs: {gpus}; FP8: {reasons.no_fp8(env) or 'yes'}",
        f"teparity: world size {_world_size(config)}, backend {_backend(config)}, "
        f"harness deadline {config.getoption('teparity_timeout'):g} s, {_ranks_label(config)}, sides "
        f"{config.getoption('teparity_sides')}",
        *(f"teparity: TE executor {info.label()}" for info in env.executors.values()),
        f"teparity: distribution: {_distribution(config)}",
        "teparity: rank environment: " + ", ".join(f"{k}={v}" for k, v in rank_env.in_force(_rank_env_set).items()),
    ]
    if broken := reasons.import_failure(env):
        lines.append(f"teparity: THE SYSTEM UNDER TEST DOES NOT IMPORT (every gate test fails): {broken}")
    if unsupported := reasons.unsupported_pair(env):
        lines.append(f"teparity: AN UNSUPPORTED PAIR (every gate test fails): {unsupported}")
    if injected := config.getoption("teparity_inject"):
        lines.append(f"teparity: INJECTED REGRESSIONS (the gate should fail): {', '.join(injected)}")
    if settings := te_settings():
        lines.append(f"teparity: TE settings from the environment: {settings}")
    if registered := known_defects.registered_for(Versions.installed()):
        lines.append(
            f"teparity: known upstream defects on these versions (strict xfails on their signature; --runxfail "
            f"runs them as plain tests): {', '.join(registered)}"
        )
    return lines


def _distribution(config: pytest.Config) -> str:
    if config.stash.get(_LONGEST_FIRST, False):
        return "longest first (expected durations: this checkout's last run, else teparity/gate/durations.json)"
    return f"--dist {config.option.dist}" if getattr(config.option, "numprocesses", None) else "one process"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """End this process's warm ranks; under torchrun, leave the process group that the multi-rank tests
    joined, all ranks together."""
    if _importing_torch is not None:
        _importing_torch.join(timeout=120)  # not torn down by the interpreter's exit mid-import
    if "teparity.launch.pool" in sys.modules:
        sys.modules["teparity.launch.pool"].close_pools()
    if "teparity.launch.torchrun" in sys.modules:
        sys.modules["teparity.launch.torchrun"].leave_joined_group()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tag each check's items with (check, executor) so that reports carry them across xdist, and mark
    those that a known upstream defect covers on the installed versions as strict xfails that expect
    only that defect's signature (``teparity.gate.known_defects``; package metadata only, no import)."""
    versions = Versions.installed()
    for item in items:
        marker = item.get_closest_marker("check")
        if marker is None:
            continue
        params = item.callspec.params if hasattr(item, "callspec") else {}
        check = marker.args[0].format(**params)  # e.g. "numerics[{recipe_id}]": one row per recipe
        executor = params.get("executor")
        item.user_properties.append((_PROPERTY, {"check": check, "executor": executor}))
        if entries := known_defects.covering(check, executor, versions):
            item.stash[_KNOWN] = entries
            item.add_marker(pytest.mark.xfail(
                strict=True, raises=tuple(e.seen_type for e in entries), reason=" | ".join(e.reason() for e in entries)
            ))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A failure that matches a covering entry's signature becomes that entry's own exception type (what
    its strict xfail expects); one that matches an entry outside its version ranges still fails, as a
    ``NearMiss`` that names the entry and the range; any other failure propagates unchanged."""
    with _judging(item):
        return (yield)


@contextlib.contextmanager
def _judging(item: pytest.Item) -> Iterator[None]:
    """Raise what ``_judged`` makes of a failure inside (the failure itself, unchanged, where it is neither)."""
    try:
        yield
    except BaseException as error:
        if (judged := _judged(item, error)) is error:
            raise
        raise judged from error


def _judged(item: pytest.Item, error: BaseException) -> BaseException:
    """``error`` as the registry sees it: the matching entry's own type, a ``NearMiss``, or itself."""
    entry = known_defects.match(item.stash.get(_KNOWN, []), error, _environment())
    if entry is not None:
        item.user_properties.append((_MATCHED, entry.id))
        return entry.seen_type(f"[known upstream defect {entry.id}] {error}")
    tag = dict(item.user_properties).get(_PROPERTY)
    versions = Versions.installed()
    near = known_defects.near_misses(tag["check"], tag["executor"], versions, error, _environment()) if tag else []
    if not near:
        return error
    item.user_properties.append((_NEAR_MISS, near[0].id))
    return NearMiss(f"{known_defects.near_miss_message(near[0], versions, item.nodeid)} {error}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    """Fail every gate test when thunder or TE is installed but does not import, or when this thunder
    release does not support this TE (a gate that cannot test must not pass); skip, before any fixture
    runs, what this machine cannot run, saying what is missing. A fixture that runs the check's ranks (the
    legacy sync scenarios) is judged as the test body is (``_judged``)."""
    if item.get_closest_marker("check"):
        if broken := reasons.import_failure(_environment()):
            pytest.fail(f"the system under test is installed but does not import: {broken}", pytrace=False)
        if unsupported := reasons.unsupported_pair(_environment()):
            pytest.fail(unsupported, pytrace=False)
    if item.get_closest_marker("fp8") and (reason := reasons.no_fp8(_environment())):
        pytest.skip(reason)
    if item.get_closest_marker("legacy_sync") and (reason := reasons.no_backward_sync(_environment())):
        pytest.skip(reason)
    with _judging(item):
        return (yield)


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def teparity_env() -> Any:
    """The probed ``versions.Environment``."""
    return _environment()


def _world_size(config: pytest.Config) -> int:
    from teparity.launch.torchrun import torchrun_world

    if (chosen := config.getoption("teparity_world_size")) is not None:
        return chosen
    joined = torchrun_world()
    return joined[1] if joined else 2


@pytest.fixture(scope="session")
def world_size(request: pytest.FixtureRequest) -> int:
    return _world_size(request.config)


def _backend(config: pytest.Config) -> str:
    from teparity.gate.ranks import default_backend

    chosen = config.getoption("teparity_backend")
    return default_backend(_world_size(config)) if chosen == "auto" else chosen


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    """The process-group backend of the multi-rank tests (``--teparity-backend``)."""
    return _backend(request.config)


def _ranks(config: pytest.Config) -> tuple[str, str | None]:
    """The launch mode of this run and, where ``forked`` was asked for and cannot work here, why not
    (the run then uses warm ranks)."""
    chosen = config.getoption("teparity_ranks")
    if chosen == "forked" and (why := _environment().fork_error):
        return "warm", why
    return chosen, None


def _ranks_label(config: pytest.Config) -> str:
    mode, fallback = _ranks(config)
    if fallback:
        return f"warm ranks (not forked: {fallback})"
    if mode == "forked":
        from teparity.launch import pool

        env = _environment()
        imports = env.fork_preload()
        if _fork_server_failure:
            return f"forked ranks (a fork server per process, each importing {imports}: {_fork_server_failure})"
        if (server := pool.started_server()) is not None:
            refused = f"; {_outer_server_refused}" if _outer_server_refused else ""
            return f"forked ranks (one fork server for the run, pid {server.process.pid}, imports {imports}{refused})"
        if (outer := pool.adopted_server()) is not None:
            standby = (f"; it keeps {outer.standby.count} ranks forked ahead, each having run "
                       f"{outer.standby.prologue} and {outer.standby.warm_up}") if outer.standby else ""
            return (f"forked ranks (the fork server of {outer.owner}, pid {outer.pid}, started before this run and "
                    f"shared with the runs it starts, imports {imports}{standby})")
        return f"forked ranks (one fork server for the run, imports {imports})"
    return f"{mode} ranks"


@pytest.fixture(scope="session")
def rank_runner(request: pytest.FixtureRequest) -> RankRunner:
    """``runner(fn, *args, world_size=N)``: the session's ranks (``--teparity-ranks``; torchrun's own
    processes under torchrun), its deadline and backend, work directories under pytest's tmp dir."""
    return _rank_runner(request.config)


_RUNNER = pytest.StashKey["RankRunner"]()


def _rank_runner(config: pytest.Config) -> RankRunner:
    """The session's one runner (the fixture's, and the one whose ranks start before the first test)."""
    if _RUNNER not in config.stash:
        from teparity.gate.ranks import rank_runner

        factory = config._tmp_path_factory
        config.stash[_RUNNER] = rank_runner(
            _ranks(config)[0], _backend(config), config.getoption("teparity_timeout"), lambda: factory.mktemp("ranks"),
            concurrent=config.getoption("teparity_sides") == "side-by-side",
        )
    return config.stash[_RUNNER]


@pytest.fixture
def parity(teparity_env: Any, rank_runner: RankRunner, backend: str, evidence: Callable[[str], None]) -> Pairs:
    """Run a parity pair (eager TE against thunder + an executor) on the session's ranks and judge it
    (``teparity.gate.pairs.Pairs``)."""
    from teparity.gate.pairs import Pairs

    return Pairs(teparity_env, rank_runner, backend, evidence)


@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Record a one-line evidence summary for the parity report (what a pass rests on)."""

    def record(summary: str) -> None:
        request.node.user_properties.append((_EVIDENCE, summary))

    return record


# -- the parity report -----------------------------------------------------------------------------


_XPASS_STRICT = "[XPASS(strict)] "


def _outcome(report: pytest.TestReport) -> TestOutcome | None:
    if report.skipped and hasattr(report, "wasxfail"):
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else report.wasxfail
        known = dict(report.user_properties).get(_MATCHED)
        return TestOutcome(report.nodeid, "known", message[:EVIDENCE_CHARS], known_defect=known)
    if (report.failed and str(report.longrepr).startswith(_XPASS_STRICT)) or (report.passed and hasattr(report, "wasxfail")):
        reason = str(report.longrepr).removeprefix(_XPASS_STRICT) if report.failed else report.wasxfail
        return TestOutcome(report.nodeid, "XPASS", reason[:EVIDENCE_CHARS])
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return TestOutcome(report.nodeid, "skip", reason.removeprefix("Skipped: "))
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else report.longreprtext
        return TestOutcome(report.nodeid, "FAIL", message[:EVIDENCE_CHARS], near_miss=dict(report.user_properties).get(_NEAR_MISS))
    if report.when == "call":
        return TestOutcome(report.nodeid, "pass", dict(report.user_properties).get(_EVIDENCE, ""))
    return None


class ParityReporter:
    """Collects test reports into the parity report, and the run's phases into its timeline; lives in the
    xdist controller or a lone process."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.report = ParityReport(environment={})
        self.timeline = Timeline(started=time.time())
        if (started := process_started()) is not None:
            self.timeline.mark("process_started", started)
        #: When the session finished (every plugin's session finish but the wrappers'), for both time lines.
        self.finished: float | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self) -> None:
        self.timeline.mark("session_started", time.time())  # after the fork server was chosen

    @pytest.hookimpl(optionalhook=True)  # xdist's hooks: absent under -p no:xdist
    def pytest_testnodeready(self) -> None:
        self.timeline.mark("workers_ready", time.time())

    @pytest.hookimpl(optionalhook=True)  # xdist's hooks: absent under -p no:xdist
    def pytest_xdist_node_collection_finished(self) -> None:
        self.timeline.mark("workers_collected", time.time())

    def pytest_collection_finish(self) -> None:
        self.timeline.mark("collected", time.time())  # a lone process (the xdist controller collects nothing)

    @pytest.hookimpl(optionalhook=True)  # xdist's hooks: absent under -p no:xdist
    def pytest_testnodedown(self) -> None:
        self.timeline.mark("workers_down", time.time())

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # an xdist worker's report, in the controller
        self.timeline.record(report.nodeid, node.gateway.id if node is not None else "main", report.start, report.stop)
        tag = dict(report.user_properties).get(_PROPERTY)
        if tag is not None and (outcome := _outcome(report)) is not None:
            self.report.record(tag["check"], tag["executor"], outcome)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._finish()
        if self.report.cells:
            terminalreporter.write_sep("=", "teparity parity report")
            terminalreporter.write_line(self.report.table())
            terminalreporter.write_line(f"teparity time: {self.timeline.summary(self.finished)}")

    def _finish(self) -> float:
        """The session's end: the terminal summary (after every plugin's session finish, xdist's teardown of
        its workers included), or the end of this wrapper where no terminal reporter runs."""
        if self.finished is None:
            self.finished = time.time()
            self.timeline.mark("session_finished", self.finished)
        return self.finished

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, exitstatus: int) -> Any:
        """Around every other plugin's session finish, so that the report's timeline holds them all."""
        try:
            return (yield)
        finally:
            self._write_report(exitstatus)

    def _write_report(self, exitstatus: int) -> None:
        from teparity.launch.torchrun import torchrun_world

        finished = self._finish()
        schedule.remember_durations(self.config, {span.nodeid: span.duration for span in self.timeline.spans.values()})
        # Every torchrun rank judged the same all-gathered evidence: rank 0 alone writes the report.
        joined = torchrun_world()
        if (path := self.config.getoption("teparity_report")) and (joined is None or joined[0] == 0):
            # 2 (interrupted, e.g. by a time limit): the report holds only the tests that finished.
            self.report.exitstatus = int(exitstatus)
            self.report.environment = self._environment_section()
            self.timeline.mark("sessionfinish_done", time.time())
            self.report.timeline = self.timeline.to_json(finished)
            self.report.write(path)

    def _environment_section(self) -> dict[str, Any]:
        from teparity.stack.provenance import teparity_commit

        env = _environment()
        ranks, not_forked = _ranks(self.config)
        return {
            **env.to_json(),
            "teparity_commit": teparity_commit(),
            "world_size": _world_size(self.config),
            "backend": _backend(self.config),
            "harness_deadline_s": self.config.getoption("teparity_timeout"),
            "ranks": ranks,
            "ranks_not_forked": not_forked,
            "launch": _ranks_label(self.config),
            "sides": self.config.getoption("teparity_sides"),
            "injected": self.config.getoption("teparity_inject"),
            "fp8": reasons.no_fp8(env) or "yes",
            "te_settings": te_settings(),
            "rank_environment": rank_env.in_force(_rank_env_set),
        }
