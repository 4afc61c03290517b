"""Standalone reproductions of the known defects, for the people who fix them (``python -m teparity repro ID``): one
script per entry under ``repros/``, importing only torch, thunder and TE, whose last line says ``REPRODUCED: ...``
(exit 0), ``NOT REPRODUCED: ...`` (exit 1) or ``CANNOT RUN HERE: ...`` (exit 2). Written out, it opens with the entry's
id, summary, ranges, cause and the newest stack a committed run showed it on."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from teparity.known.defect import KnownDefect
from teparity.known.registry import BY_ID
from teparity.known.seen import newest_seen

REPROS = Path(__file__).parent / "repros"
#: What a run of a reproduction exits with, by its verdict.
VERDICTS = {0: "REPRODUCED", 1: "NOT REPRODUCED", 2: "CANNOT RUN HERE"}
#: Entries whose reproduction is one script for several, each with its own ``EXECUTOR``: entry -> (script, executor).
SHARED = {
    "legacy-executor-loses-te-from-te-2.10": ("executor-loses-te-from-te-2.10", "legacy"),
    "functional-executor-loses-te-from-te-2.10": ("executor-loses-te-from-te-2.10", "functional"),
    "legacy-fp8-group-ignored": ("fp8-group-ignored", "legacy"),
    "functional-fp8-group-ignored": ("fp8-group-ignored", "functional"),
    "legacy-runs-fp8-inside-disabled-autocast": ("fp8-where-autocast-disabled", "legacy"),
    "functional-runs-fp8-where-autocast-disabled": ("fp8-where-autocast-disabled", "functional"),
}
_EXECUTOR_LINE = 'EXECUTOR = "legacy"\n'


@functools.cache
def available() -> list[str]:
    """The entries that have a reproduction: a script named for the entry, or a share of one (``SHARED``)."""
    return sorted({path.stem for path in REPROS.glob("*.py") if path.stem in BY_ID} | set(SHARED))


def source(entry_id: str) -> str:
    """The script of ``entry_id``'s reproduction, without its header."""
    if entry_id not in SHARED:
        return (REPROS / f"{entry_id}.py").read_text()
    name, executor = SHARED[entry_id]
    text = (REPROS / f"{name}.py").read_text()
    if _EXECUTOR_LINE not in text:
        raise ValueError(f"repros/{name}.py sets no {_EXECUTOR_LINE.strip()!r} for {entry_id} to change")
    return text.replace(_EXECUTOR_LINE, f'EXECUTOR = "{executor}"\n', 1)


def script(entry_id: str) -> str:
    """The reproduction of ``entry_id`` with its header: what a thunder or TE developer runs and keeps."""
    return _header(BY_ID[entry_id]) + source(entry_id)


def _header(entry: KnownDefect) -> str:
    thunder, te = newest_seen().get(entry.id, (None, None))
    said = [
        f"Reproduction of {entry.id}: {entry.summary}.",
        f"Holds on lightning-thunder {entry.thunder}, TransformerEngine {entry.te}"
        + (" (or none installed)" if entry.without_te else "") + ".",
        f"Newest stack a run showed it on: thunder {thunder or '-'}, TE {te or '-'}.",
        f"Cause: {entry.cause}.",
        "Last line: REPRODUCED (exit 0), NOT REPRODUCED (exit 1) or CANNOT RUN HERE (exit 2).",
    ]
    return "".join("".join(f"# {line}\n" for line in textwrap.wrap(paragraph, 116)) for paragraph in said) + "\n"


@dataclasses.dataclass(frozen=True)
class Ran:
    """One run of a reproduction: its exit status (None: stopped at the timeout) and its output streams."""

    status: int | None
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stderr + self.stdout  # the verdict last


def execute(entry_id: str, timeout_s: float) -> Ran:
    """Run the written reproduction here, in a process and a session of its own: at ``timeout_s`` the session is killed
    whole, so ranks the script spawned (torch.multiprocessing, torchrun) die with it."""
    with tempfile.TemporaryDirectory(prefix="teparity-repro-") as folder:
        path = Path(folder) / f"{entry_id}.py"
        path.write_text(script(entry_id))
        process = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, cwd=folder, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
            return Ran(process.returncode, stdout, stderr)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            try:
                stdout, stderr = process.communicate(timeout=30)
            except subprocess.TimeoutExpired as late:  # a process that left the session holds the pipes
                stdout, stderr = _text(late.stdout), _text(late.stderr)
            return Ran(None, stdout, stderr)


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def run(entry_id: str, timeout_s: float = 600) -> tuple[int, str]:
    """Run the reproduction here (``execute``): its exit status and output; past ``timeout_s``, TimeoutExpired."""
    ran = execute(entry_id, timeout_s)
    if ran.status is None:
        raise subprocess.TimeoutExpired(f"{entry_id}.py", timeout_s, ran.stdout, ran.stderr)
    return ran.status, ran.output


def issue_body(entry_id: str, versions: str, status: int, output: str) -> str:
    """An upstream issue's body: the title, the environment, the script, and what a run here printed."""
    entry = BY_ID[entry_id]
    lines = [line for line in output.splitlines() if line.strip() and "warn" not in line.lower()]
    return "\n".join([
        f"# {entry.summary[0].upper() + entry.summary[1:]}",
        "",
        f"**Environment**: {versions}, Python {sys.version.split()[0]}",
        "",
        f"**Expected**: the reproduction below prints `NOT REPRODUCED` (exit 1). **Actual** on this machine: "
        f"`{VERDICTS.get(status, f'exit {status}')}` (exit {status}):",
        "",
        "```",
        *lines[-12:],
        "```",
        "",
        "<details><summary>Reproduction (Python; torch, thunder and TransformerEngine only)</summary>",
        "",
        "```python",
        script(entry_id).rstrip(),
        "```",
        "",
        "</details>",
        "",
    ])
