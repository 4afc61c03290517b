"""Standby ranks of a fork server (``teparity.launch.standby``): forked ahead, each having run the
prologue it stands in for and a warm-up; a request that names that prologue takes one and runs in its own
environment, others get a new child; a standby whose imports changed is never run as a rank; one that fails
stops them; those taken are forked anew between runs."""

from __future__ import annotations

import os
import re
import textwrap
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from teparity.launch.fork_client import ForkedProcess, ForkServerClient, StartedServer, start_server
from teparity.launch.standby import Standby

pytestmark = pytest.mark.multirank

#: Importable by the server and its children (the test puts its folder on sys.path): the prologue and
#: warm-up of the standbys, and the call a request runs, which says who ran it and what ran before, then
#: waits to be let go (so that the test decides when a client has no process running).
_MODULE = """
    import os, time
    from pathlib import Path

    PROLOGUE_RAN_IN = None


    def prologue():
        global PROLOGUE_RAN_IN
        import teparity_test_standby_extra  # a file the server did not import

        PROLOGUE_RAN_IN = os.getpid()


    def warm_up():
        if why := os.environ.get("TEPARITY_TEST_STANDBY_FAIL"):  # the first standby fails, the others hold
            try:
                os.close(os.open(os.environ["TEPARITY_TEST_STANDBY_GATE"] + ".failed", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                raise RuntimeError(why)
        gate = Path(os.environ["TEPARITY_TEST_STANDBY_GATE"])
        while not gate.exists():
            time.sleep(0.02)


    def report(connection):
        from teparity.launch.standby import check_standby

        try:
            said = {"ahead": check_standby()}
        except RuntimeError as error:
            said = {"refused": str(error)}
        connection.send(said | {"pid": os.getpid(), "prologue_ran_in": PROLOGUE_RAN_IN,
                                "client_setting": os.environ.get("TEPARITY_TEST_CLIENT_SETTING")})
        connection.recv()
"""
PROLOGUE = "teparity_test_standby.prologue"
WARM_UP = "teparity_test_standby.warm_up"


@pytest.fixture
def helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The helper module and the one its prologue imports, on this process's (and so the server's) path."""
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "teparity_test_standby.py").write_text(textwrap.dedent(_MODULE))
    (folder / "teparity_test_standby_extra.py").write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    """The file the standbys' warm-up waits for (made at once, unless a test holds them: ``server``'s param)."""
    return tmp_path / "gate"


@pytest.fixture
def server(helpers: Path, gate: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StartedServer]:
    """A fork server with 2 standby ranks; ``request.param``: ``hold`` (their warm-up waits for ``gate``) and
    ``fail`` (the first standby's warm-up raises that)."""
    options = getattr(request, "param", {})
    if not options.get("hold"):
        gate.touch()
    env = {**os.environ, "TEPARITY_TEST_STANDBY_GATE": str(gate)}
    if "fail" in options:
        env["TEPARITY_TEST_STANDBY_FAIL"] = options["fail"]
    started = start_server(("teparity.launch.outcome",), tmp_path / "server", env=env, standby=Standby(2, PROLOGUE, WARM_UP))
    yield started
    started.stop()


def _client(server: StartedServer) -> ForkServerClient:
    return ForkServerClient(server.address, server.process.pid, str(server.log), "a test")


def _start(client: ForkServerClient, prologue: str | None) -> tuple[ForkedProcess, Connection]:
    import teparity_test_standby  # type: ignore[import-not-found]

    return client.start(teparity_test_standby.report, (), prologue=prologue)


def _said(started: tuple[ForkedProcess, Connection], log: str) -> dict[str, Any]:
    """What ``report`` said in a started process, which is then let go and reaped."""
    process, connection = started
    try:
        assert connection.poll(120), f"the forked process said nothing; the server's log:\n{Path(log).read_text()}"
        return connection.recv() | {"process": process.pid}
    finally:
        connection.send("go")
        process.join(30)
        process.close()
        connection.close()


def _run(client: ForkServerClient, prologue: str | None) -> dict[str, Any]:
    return _said(_start(client, prologue), client.log)


def _status_within(client: ForkServerClient, wanted: Callable[[dict[str, Any]], bool], seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while not wanted(status := client.standby_status()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return status


def test_a_request_naming_the_prologue_takes_a_ready_standby_in_its_own_environment(
        server: StartedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The standby ran the prologue before the request (in its own pid), then took the client's environment;
    a request naming another prologue gets a process that ran none."""
    client = _client(server)
    assert client.standby == Standby(2, PROLOGUE, WARM_UP), client.standby
    client.wait_for_standby(120)
    monkeypatch.setenv("TEPARITY_TEST_CLIENT_SETTING", "the client's")
    taken = _run(client, PROLOGUE)
    assert taken["prologue_ran_in"] == taken["pid"] == taken["process"], taken
    assert taken["client_setting"] == "the client's", taken
    assert taken["ahead"].startswith(f"a standby rank of the fork server (pid {server.process.pid}), ready "), taken
    other = _run(client, "teparity_test_standby.another_prologue")
    assert other["prologue_ran_in"] is None and other["ahead"] is None, other
    assert client.standby_status()["taken"] == 1
    client.sock.close()


def test_standbys_taken_are_forked_anew_once_no_client_has_a_process_running(server: StartedServer) -> None:
    """Three requests at once take the two standbys and a new child; none is forked anew while they run (a
    run's ranks would share the machine with their warm-up), both once they ended."""
    client = _client(server)
    client.wait_for_standby(120)
    running = [_start(client, PROLOGUE) for _ in range(3)]
    time.sleep(1)
    assert client.standby_status() == {"ready": 0, "warming": 0, "taken": 2, "failed": None}
    said = [_said(started, client.log) for started in running]
    assert [s["prologue_ran_in"] is not None for s in said] == [True, True, False], said
    status = _status_within(client, lambda status: status["ready"] == 2)
    assert status == {"ready": 2, "warming": 0, "taken": 2, "failed": None}, status
    assert _run(client, PROLOGUE)["prologue_ran_in"] is not None, "a standby forked anew was not taken"
    client.sock.close()


def test_a_ready_standby_whose_imports_changed_is_killed_not_taken(server: StartedServer, helpers: Path) -> None:
    """A server that outlives its runs must not hand out ranks that run code no longer installed."""
    client = _client(server)
    client.wait_for_standby(120)
    extra = helpers / "teparity_test_standby_extra.py"
    extra.write_text("VERSION = 2  # another version\n")
    fresh = _run(client, PROLOGUE)
    assert fresh["prologue_ran_in"] is None and "refused" not in fresh, f"a stale standby was taken: {fresh}"
    log = Path(server.log).read_text()
    assert log.count(f"killed, not taken: 1 of the files it imported changed since ({extra})") == 2, log
    client.sock.close()


@pytest.mark.parametrize("server", [{"hold": True}], indirect=True)
def test_a_standby_taken_while_warming_refuses_to_run_code_that_changed_since(
        server: StartedServer, helpers: Path, gate: Path) -> None:
    """No standby is ready: the request takes one still warming; a file its prologue imported changed before
    it was done, so its process refuses with the file named instead of running the call."""
    client = _client(server)
    assert _status_within(client, lambda status: status["warming"] == 2)["ready"] == 0
    time.sleep(1)  # their prologue imported the extra module by now: they wait at the gate
    started = _start(client, PROLOGUE)
    extra = helpers / "teparity_test_standby_extra.py"
    extra.write_text("VERSION = 2  # another version\n")
    gate.touch()
    said = _said(started, client.log)
    assert "refused" in said, f"a standby ran code that changed since it imported it: {said}"
    assert f"1 of the files it imported then changed since ({extra}): it would run code no longer installed" in said["refused"], said
    client.sock.close()


@pytest.mark.parametrize("server", [{"fail": "a warm-up that fails", "hold": True}], indirect=True)
def test_a_standby_that_fails_its_warm_up_stops_the_standbys_and_requests_get_new_children(server: StartedServer) -> None:
    """One standby fails while the other is still warming (held): that one is killed, not handed out."""
    client = _client(server)
    client.wait_for_standby(120)  # returns once one failed
    status = client.standby_status()
    assert status["failed"] is not None and "before a request took it" in status["failed"], status
    assert status["ready"] == status["warming"] == 0, status
    assert _run(client, PROLOGUE)["prologue_ran_in"] is None
    log = Path(server.log).read_text()
    assert "RuntimeError: a warm-up that fails" in log and "no more standby ranks" in log, log
    assert re.search(r"no more standby ranks: .*; [12] more killed, not handed out", log), log  # 2: one forked in its place
    client.sock.close()
