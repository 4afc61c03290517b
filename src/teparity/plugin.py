"""The teparity pytest plugin: its options and markers, and the registration of the parts that do the work.

The process that starts a run (the xdist controller, or a lone pytest) gets ``gate.controller.Controller``
(the fork server, the schedule, the header) and ``gate.reporter.ParityReporter``; a process that runs tests (an
xdist worker, or a lone pytest) gets ``gate.worker.Worker`` (its ranks, each test's admission, teardown) and
``gate.known_marks.KnownMarks`` (the registry at work); every process gets the fixtures. The run's settings are
resolved once, at configure (``gate.settings``).

Imports no torch, thunder or TE at module import (``--help``, collection and the xdist controller stay fast and
never touch CUDA); what the machine can run comes from the cached environment probe.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
from typing import Any

import pytest

from teparity import checks
from teparity.gate import loggers, schedule
from teparity.mutations.catalog import CATALOG, ENV_VAR
from teparity.option_types import positive
from teparity.stack.reasons import ALLOW_NO_THUNDER

#: Set on a run under ``-n`` without ``--dist``: its tests are scheduled longest first.
_LONGEST_FIRST = pytest.StashKey[bool]()

MARKERS = (
    "check(name, parameters=None): the parity-report row this test feeds (teparity.checks): the check, or a callable "
    "of the test's parameters, and a format over them for the row's parameter part",
    "fp8: needs TransformerEngine and an FP8-capable GPU (sm_89+); skipped otherwise, with the reason",
    "legacy_sync: needs thunder's legacy TE executor with its backward sync; skipped otherwise, with the reason",
    "multirank: spawns ranks with torch.distributed",
    f"{schedule.MARKER}(key): tests with one key share a rank run (under -n they go to one worker, so that it runs "
    "once); key is a format string over the test's parameters, or a callable of them",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("teparity", "teparity: thunder + TransformerEngine parity gate")
    group.addoption(
        "--teparity-timeout", type=positive(float), default=180.0,
        help="harness deadline in seconds of a multi-rank run, from when every rank joined its group; hung ranks are "
        "stack-dumped and killed (default 180; the process-group timeout is min(60, this / 2))",
    )
    group.addoption(
        "--teparity-world-size", type=positive(int), default=None,
        help="ranks for the multi-rank tests (default: torchrun's WORLD_SIZE under torchrun, else 2)",
    )
    group.addoption(
        "--teparity-backend", choices=("auto", "gloo", "nccl"), default="auto",
        help="process-group backend of multi-rank tests: auto = NCCL with one GPU per rank when there are "
        "enough GPUs, else gloo (ranks share one GPU or the CPU)",
    )
    group.addoption(
        "--teparity-ranks", choices=("forked", "warm", "fresh"), default="forked",
        help="forked: warm ranks forked from the run's one fork server, which imported torch and TE (and inductor's "
        "compiler where the probe found fork still works after them) once for the controller and every xdist worker "
        "(where forking works here, else warm, and the header says why); warm: each pytest process keeps its "
        "spawned ranks between runs (reset between sides; a pool that saw a failure is discarded); fresh: new "
        "processes for every side (default forked)",
    )
    group.addoption(
        "--teparity-sides", choices=("serial", "side-by-side"), default="serial",
        help="serial: the sides a test compares (eager TE and thunder, thunder's transform and torch's) run one "
        "after the other on the same ranks; side-by-side: at once, each on forked or warm ranks of its own (twice "
        "the rank processes and CUDA contexts), so a test costs its longer side (default serial; fresh ranks and "
        "torchrun are always serial)",
    )
    group.addoption("--teparity-report", metavar="PATH", help="write the parity report as JSON to PATH")
    group.addoption(
        "--teparity-base", metavar="BASE.json", type=_base_report, default=None,
        help="judge the change against the parity report of its base (the build a PR branched from): a test red here "
        "and red the same way there is already red on the base, an XPASS of a test known there is fixed by this "
        "change; only other reds turn the run red",
    )
    group.addoption(
        ALLOW_NO_THUNDER, action="store_true",
        help="run where lightning-thunder is not installed: every check skips and the run can be green (default: "
        "such a run stops at start-up, red, as it could test nothing)",
    )
    group.addoption(
        "--teparity-inject", metavar="NAME", action="append", default=[], choices=sorted(CATALOG),
        help="apply a known regression from teparity.mutations in every process, ranks included "
        "(repeatable; the gate is expected to fail)",
    )
    group.addoption("--teparity-reference-store", metavar="DIR", default=None,
                    help="where reference sides (eager TE, torch's DDP and FSDP2) are kept and reused under their key "
                    "(teparity.gate.references); default pytest's cache folder; 'none' (and under torchrun): computed every time")
    group.addoption("--teparity-fresh-reference", action="store_true", help="compute every reference side and store it")
    group.addoption(
        "--teparity-rows", metavar="ROW,ROW", type=_row_patterns, default=(),
        help="run only the gate tests of these parity-report rows, deselecting the rest: CHECK[*] every "
        "parametrization of a check, CHECK its row or every parametrization, CHECK[PARAMETERS] that row "
        "(what a mutation's killed_by names: python -m teparity kill-matrix --targeted)",
    )


def _base_report(text: str) -> str:
    """``--teparity-base``: a file that is no parity report is a usage error that says why."""
    from teparity.report.parity import read_report

    from teparity.report.parity import NotAReport

    try:
        read_report(text)
    except NotAReport as error:
        raise argparse.ArgumentTypeError(f"{text}: {error}") from None
    return text


def _row_patterns(text: str) -> tuple[str, ...]:
    """``--teparity-rows``: a pattern of no registered check is a usage error that names the checks."""
    try:
        return checks.patterns(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--teparity-rows``: keep the gate tests of those rows; the rest go through ``pytest_deselected``, as ``-k``'s
    do, so the terminal counts them. Before the gate tags its tests (``gate.known_marks``)."""
    from teparity.gate.settings import settings

    if not (patterns := settings(config).rows):
        return
    from teparity.gate.known_marks import in_rows

    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if in_rows(item, patterns) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Any:
    """Under ``-n N`` with no ``--dist``, schedule the tests longest first (``teparity.gate.schedule``): a gate test
    takes 0.01 s (a skip) to about 30 s, and xdist's ``load`` left one worker of 12 with 42 s of rank work where
    the mean was 28 s. Runs before xdist's own hook (a wrapper runs before every plain implementation), which
    turns an unset ``--dist`` into ``load``; an explicit ``--dist`` is kept."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "no":
        config.option.dist = "load"
        config.stash[_LONGEST_FIRST] = True
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    from teparity.gate import fixtures, profiles, settings
    from teparity.launch import rank_env

    loggers.snapshot_logger_registry()  # before any thread of this process imports while tests run
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    resolved = settings.resolve(config, longest_first=config.stash.get(_LONGEST_FIRST, False))
    if resolved.inject:
        os.environ[ENV_VAR] = ",".join(resolved.inject)
    rank_env_set = rank_env.apply_defaults()
    profiles.register_hypothesis_profiles()
    config.pluginmanager.register(fixtures, "teparity-fixtures")
    if not hasattr(config, "workerinput"):
        from teparity.gate.controller import Controller
        from teparity.gate.reporter import ParityReporter
        from teparity.stack.envprobe import new_run

        new_run()  # before the workers start: they inherit the run's probe
        controller = Controller(config, resolved, rank_env_set)
        config.pluginmanager.register(controller, "teparity-controller")
        config.pluginmanager.register(ParityReporter(config, controller), "teparity-parity-reporter")
    if not _starts_workers(config):  # this process runs tests
        from teparity.gate.known_marks import KnownMarks
        from teparity.gate.worker import Worker

        config.pluginmanager.register(Worker(config, resolved), "teparity-worker")
        config.pluginmanager.register(KnownMarks(), "teparity-known-marks")


def _starts_workers(config: pytest.Config) -> bool:
    """Whether xdist runs this process as the controller of workers (its ``DSession``: ``--dist`` and ``--tx`` set,
    not collecting only), which runs no test itself."""
    return (not hasattr(config, "workerinput") and not config.option.collectonly
            and getattr(config.option, "dist", "no") != "no" and bool(getattr(config.option, "tx", None)))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave quickly: what exists at exit is frozen out of the interpreter's last garbage collection, which took
    about 1 s once torch and thunder were imported; an xdist run ends only once its workers have exited
    (docs/facts.md, "Standby ranks, shared runs, a process's exit"). Every exit handler still runs."""
    atexit.register(gc.freeze)
