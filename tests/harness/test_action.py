"""The GitHub Action (``action.yml``) run as GitHub runs it, on the CPU: its steps in order with its inputs, its
step outputs and ``$GITHUB_STEP_SUMMARY``; the summary holds the parity table and every failure's evidence, and the
action fails exactly where the gate does."""

from __future__ import annotations

import fcntl
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.multirank
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Step:
    name: str
    run: str
    id: str | None = None
    always: bool = False


@dataclass
class Action:
    defaults: dict[str, str]
    steps: list[Step] = field(default_factory=list)


def _action() -> Action:
    """action.yml's inputs' defaults and its steps (the subset of YAML it is written in: one key per line, ``run: |``
    blocks indented under their step)."""
    lines = (REPO / "action.yml").read_text().splitlines()
    action, section, current, block = Action({}), None, None, None
    for line in lines:
        if block is not None:
            if line.startswith(" " * 8) or not line.strip():
                block.append(line[8:])
                continue
            current.run, block = "\n".join(block).strip() + "\n", None
        if not line.startswith(" ") and line.rstrip().endswith(":"):
            section = line.rstrip(":")
        elif section == "inputs" and (m := re.match(r"  ([\w-]+):$", line)):
            name = m.group(1)
        elif section == "inputs" and (m := re.match(r"    default: (.*)$", line)):
            action.defaults[name] = m.group(1).strip('"')
        elif (m := re.match(r"    - name: (.*)$", line)):
            current = Step(m.group(1), "")
            action.steps.append(current)
        elif current is not None and (m := re.match(r"      (id|if|run): ?(.*)$", line)):
            key, value = m.groups()
            if key == "id":
                current.id = value
            elif key == "if":
                current.always = value == "always()"
            elif value == "|":
                block = []
            else:
                current.run = value + "\n"
    if block is not None:
        current.run = "\n".join(block).strip() + "\n"
    return action


@contextmanager
def _one_pip_at_a_time(step: Step) -> Iterator[None]:
    """Two xdist workers installing teparity editable into the same venv at once can break each other's install."""
    if "pip install" not in step.run:
        yield
        return
    with open(Path(tempfile.gettempdir()) / "teparity-action-pip.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(inputs: dict[str, str], tmp_path: Path) -> tuple[int, str, list[str]]:
    """The action's steps as a runner runs them; returns the action's status, the job summary and the steps run, each
    with its exit status and the tail of its stderr (the evidence when an assertion on them fails)."""
    action = _action()
    values = {**action.defaults, **inputs}
    outputs: dict[str, dict[str, str]] = {}
    summary, workspace = tmp_path / "summary.md", tmp_path / "workspace"
    workspace.mkdir()
    failed, ran = 0, []
    for number, step in enumerate(action.steps):
        if failed and not step.always:
            continue

        def expand(match: re.Match[str]) -> str:
            words = match.group(1).split(".")
            if words[0] == "inputs":
                return values[words[1]]
            if words[0] == "github" and words[1] == "action_path":
                return str(REPO)
            if words[0] == "steps":
                return outputs.get(words[1], {}).get(words[3], "")
            raise AssertionError(f"unknown expression {match.group(0)}")

        script = re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", expand, step.run)
        output = tmp_path / f"output-{number}"
        output.touch()
        env = {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(workspace),
               "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(Path.home())}
        with _one_pip_at_a_time(step):
            done = subprocess.run(["bash", "-e", "-c", script], cwd=workspace, env=env, capture_output=True, text=True,
                                  timeout=900)
        ran.append(f"{step.name} (exit {done.returncode}{': ' + done.stderr[-300:] if done.returncode else ''})")
        if step.id:
            outputs[step.id] = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        if done.returncode != 0:
            failed = failed or done.returncode
    return failed, summary.read_text() if summary.exists() else "", ran


@pytest.mark.parametrize("inject", [None, "ddp-gradient-not-reduced"])
def test_the_action_runs_the_gate_writes_its_summary_and_exits_with_its_status(inject: str | None, tmp_path: Path) -> None:
    args = f"-p no:xdist tests/trace/test_ddp_transform.py{f' --teparity-inject={inject}' if inject else ''}"
    status, summary, ran = _run({"python": sys.executable, "pytest-args": args}, tmp_path)
    assert (tmp_path / "workspace" / "teparity-report.json").is_file(), f"the report goes to the workspace; steps: {ran}"
    assert "| `ddp-transform-matches-torch-ddp` |" in summary, summary
    assert [step.split(" (exit")[0] for step in ran] == [step.name for step in _action().steps], ran
    if inject is None:
        assert status == 0 and summary.startswith("## teparity: GREEN (exit 0): 0 FAIL, 0 XPASS"), summary
        assert "failing test" not in summary
    else:
        assert status == 1 and summary.startswith("## teparity: RED (exit 1): 1 FAIL, 0 XPASS"), summary
        assert "### 1 failing test(s)" in summary and "**FAIL** `tests/trace/test_ddp_transform.py::" in summary, summary
        assert "2.bias: Tensor-likes are not close" in summary, summary


def test_a_gate_that_wrote_no_report_is_red_in_the_summary_too(tmp_path: Path) -> None:
    status, summary, _ = _run({"python": sys.executable, "pytest-args": "--teparity-timeout=0"}, tmp_path)
    assert status == 4 and summary.startswith("## teparity: RED (exit 4, usage error): no parity report"), summary
