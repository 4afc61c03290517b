"""A fork server shared by the pytest runs of one command (``python -m teparity serve``, ``repeat``): a run
forks its ranks from it only where it fits the run (the same preload and environment, no imported file
changed since), says so in its header and report, and the server dies with the command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from teparity.report.table import unwrapped
from teparity.inrank import faults
from teparity.launch import fork_choice
from teparity.launch.fork_client import FORK_SERVER_VARIABLE, ForkServerClient, start_server
from harness import REPO

pytestmark = pytest.mark.multirank

_RUN = """
    import json, os
    from pathlib import Path
    from teparity.inrank import faults, forkable
    from teparity.launch.pool import warm_ranks

    def test_forked_ranks(tmp_path):
        parents = warm_ranks(faults.parent_of_rank, world_size=2, backend="gloo", timeout=120, workdir=tmp_path,
                             fork_preload=(forkable.__name__,))
        out = Path(os.environ["TEPARITY_TEST_OUT"]) / f"{os.getpid()}.json"
        out.write_text(json.dumps(parents))
"""


def _served(pytester: pytest.Pytester, command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``command`` under ``python -m teparity serve`` in the pytester folder (with ``_RUN`` as its test file),
    in this process's environment naming no fork server, plus ``env``; the ranks' parents land in out/."""
    pytester.makepyfile(test_forked=textwrap.dedent(_RUN))
    (pytester.path / "out").mkdir()
    environ = {k: v for k, v in os.environ.items() if k != FORK_SERVER_VARIABLE}
    environ.update(TEPARITY_TEST_OUT=str(pytester.path / "out"))
    return subprocess.run(
        [sys.executable, "-m", "teparity", "serve", "--workdir", str(pytester.path / "served"), "--", *command],
        cwd=pytester.path, env=environ | (env or {}), capture_output=True, text=True, timeout=600, check=False,
    )


def _pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "teparity.plugin", "-p", "no:cacheprovider", *args]


def _server_pid(pytester: pytest.Pytester) -> int:
    log = (pytester.path / "served" / "forkserver.log").read_text()
    return int(log.split("teparity fork server: pid ", 1)[1].split()[0])


def _parents(pytester: pytest.Pytester) -> set[int]:
    return {pid for out in (pytester.path / "out").iterdir() for pid in json.loads(out.read_text())}


def test_every_worker_of_a_run_under_serve_forks_from_the_served_fork_server(pytester: pytest.Pytester) -> None:
    """Both xdist workers fork their ranks from the server that ``serve`` started; the run starts none, its
    header and report name the server, and the server is gone once ``serve`` returned the run's status."""
    run = _served(pytester, _pytest("-n", "2", "--dist", "each", f"--basetemp={pytester.path / 'bt'}",
                                    f"--teparity-report={pytester.path / 'report.json'}", "test_forked.py"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    server = _server_pid(pytester)
    assert _parents(pytester) == {server}, f"ranks forked by {_parents(pytester)}, not the served server {server}"
    assert not list((pytester.path / "bt").rglob("forkserver.log")), "the run started a fork server of its own"
    launch = json.loads((pytester.path / "report.json").read_text())["environment"]["launch"]
    assert f"the fork server of python -m teparity serve, pid {server}, started before this run" in launch, launch
    assert launch in unwrapped(run.stdout), run.stdout[-3000:]
    assert not faults.still_running_after([server], 10), "the served fork server outlived serve"


def test_a_run_in_another_environment_starts_its_own_server_and_says_why(pytester: pytest.Pytester) -> None:
    """What the served server imported read its environment: a run whose environment differs (here a
    variable the shell sets for it alone) forks from a server of its own and its header names the variable;
    the command's exit status is serve's."""
    script = "TEPARITY_TEST_SETTING=other " + " ".join(_pytest("-p", "no:xdist", "test_forked.py")) + "; exit 3"
    run = _served(pytester, ["bash", "-c", script])
    assert run.returncode == 3, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout, run.stdout[-3000:]
    server = _server_pid(pytester)
    assert server not in _parents(pytester), "a run in another environment forked from the served server"
    assert (f"not the fork server of python -m teparity serve (pid {server}): the environment differs from the fork "
            f"server's (pid {server}) in TEPARITY_TEST_SETTING") in unwrapped(run.stdout), run.stdout[-3000:]


def test_a_fork_server_names_the_files_it_imported_that_changed_since(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that outlives a run must not fork ranks that run code no longer installed: once a module
    it imported is rewritten, its hello names the file and a run does not take it."""
    module = tmp_path / "teparity_test_preloaded.py"
    module.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    started = start_server(("teparity_test_preloaded",), tmp_path / "server")
    try:
        def hello() -> ForkServerClient:
            client = ForkServerClient(started.address, started.process.pid, str(started.log), "a test")
            client.sock.close()
            return client

        assert hello().changed == (0, ()), "a file changed before anything was written"
        module.write_text("VALUE = 2  # another version\n")
        client = hello()
        assert client.changed == (1, (str(module),)), client.changed
        why = fork_choice.unfit(client, ("teparity_test_preloaded",))
        assert why is not None and f"1 files that the fork server (pid {started.process.pid}) imported changed since: {module}" in why, why
    finally:
        started.stop()


def test_a_repeat_forks_every_runs_ranks_from_one_fork_server(tmp_path: Path) -> None:
    """Two runs of a repeat of gate checks that fork ranks: both controllers forked from the one server the
    repeat started and neither started its own (repeat.json and their headers say so), and each run's ranks
    are that server's standby ranks, which ran the gate's rank prologue before the run; with
    ``--server-per-run`` each run started its own, which keeps none."""
    root = REPO
    environ = {k: v for k, v in os.environ.items() if k != FORK_SERVER_VARIABLE}
    checks = ["tests/trace/test_legacy_backward_sync.py", "-k", "ranks[ddp-legacy]", "-p", "no:xdist"]
    for name, extra in (("shared", ["--standby-ranks", "2"]), ("own", ["--server-per-run"])):
        workdir = tmp_path / name
        run = subprocess.run([sys.executable, "-m", "teparity", "repeat", "2", "--workdir", str(workdir), *extra, "--", *checks],
                             cwd=root, env=environ, capture_output=True, text=True, timeout=600, check=False)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        result = json.loads((workdir / "repeat.json").read_text())
        assert result["tests"] == 3, result
        own_servers = [log for number in (1, 2) for log in (workdir / f"run0{number}").rglob("forkserver.log")]
        launches = [json.loads((workdir / f"run0{number}.json").read_text())["environment"]["launch"] for number in (1, 2)]
        if name == "shared":
            log = (workdir / "forkserver" / "forkserver.log").read_text()
            server, owner = map(int, re.match(r"teparity fork server: pid (\d+) for pid (\d+)", log).groups())
            assert result["fork_server"] == f"one for every run of a part, pid {server}, started by python -m teparity repeat", result
            assert not own_servers, f"a run of the repeat started its own fork server: {own_servers}"
            clients = re.findall(r"serving pid (\d+)", log)
            # The repeat: waiting for its imports, then for its standby ranks before each run; and each run.
            assert clients.count(str(owner)) == 3 and len(set(clients) - {str(owner)}) == 2, log
            assert result["parts"][0]["fork_server_ready_s"] > 0, result["parts"]
            assert result["parts"][0]["standby_ranks"]["count"] == 2, result["parts"]
            assert all(f"the fork server of python -m teparity repeat, pid {server}," in launch
                       and "it keeps 2 ranks forked ahead, each having run teparity.inrank.task.preload" in launch
                       for launch in launches), launches
            for number in (1, 2):
                ranks = sorted((workdir / f"run0{number}").rglob("rank*.log"))
                assert len(ranks) == 2 and all(
                    f"teparity rank: a standby rank of the fork server (pid {server}), ready " in rank.read_text()
                    and "teparity rank preload, done before this run: " in rank.read_text() for rank in ranks
                ), f"run {number}'s ranks were not the server's standbys: {[rank.read_text()[:300] for rank in ranks]}"
        else:
            assert not [rank for rank in workdir.rglob("rank*.log") if "standby" in rank.read_text()], "a run's own server kept standbys"
            assert len(own_servers) == 2, f"--server-per-run: {len(own_servers)} fork servers for 2 runs"
            assert result["fork_server"].startswith("each run's own"), result
            assert all("one fork server for the run" in launch for launch in launches), launches


def test_the_probes_run_token_is_no_reason_to_refuse_a_served_fork_server() -> None:
    """Every pytest run sets its own probe run (``envprobe.new_run``): a server shared by the runs of a command
    must not count that as an environment of its own (each run then started its own server)."""
    from teparity.launch.fork_client import PER_PROCESS_VARIABLES
    from teparity.stack.envprobe import RUN_VARIABLE

    assert RUN_VARIABLE in PER_PROCESS_VARIABLES
