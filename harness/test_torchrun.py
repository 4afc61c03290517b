"""Under torchrun the multi-rank tests join the existing process group instead of spawning ranks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teparity.known.defects.thunderfx_cannot_interpret_torch_2_12_fx_codegen import ENTRY as TORCH_2_12_THUNDERFX
from harness import REPO

pytestmark = [
    pytest.mark.multirank,
    pytest.mark.legacy_sync,
]


def _torchrun(*args: str, cwd: Path) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-4000:]
    return output


def test_the_gate_runner_joins_the_torchrun_group_instead_of_spawning(tmp_path: Path) -> None:
    script = tmp_path / "join.py"
    script.write_text(
        "import os\n"
        "from teparity.inrank import faults\n"
        "from teparity.gate.ranks import rank_runner\nfrom teparity.launch.torchrun import leave_joined_group\n"
        "pids = rank_runner('fresh', 'gloo', 60.0, lambda: None)(faults.pid_of_rank, world_size=2)\n"
        "print('joined' if os.getpid() in pids and len(set(pids)) == 2 else f'spawned {pids}', flush=True)\n"
        "leave_joined_group()\n"
        "threads = [open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir('/proc/self/task')]\n"
        "print(f'left, gloo threads {threads.count(\"pt_gloo_runloop\")}', flush=True)\n"
    )
    output = _torchrun(str(script), cwd=tmp_path)
    assert output.count("joined") == 2, output[-4000:]
    # Leaving destroyed the group: no gloo thread is left to abort the interpreter's shutdown.
    assert output.count("left, gloo threads 0") == 2, output[-4000:]


def test_the_ddp_trace_checks_run_on_torchrun_ranks(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    # A reference store named: under torchrun it keeps nothing (a process that reused a side would leave its peers).
    output = _torchrun("-m", "pytest", "tests/trace", "-k", "ddp", "-p", "no:xdist", "-p", "no:cacheprovider", "-rA",
                       "--teparity-report", str(report), f"--teparity-reference-store={tmp_path / 'store'}", cwd=REPO)
    # Both torchrun processes ran the 3 DDP sync checks, ddp-transform-matches-torch-ddp and thunderfx-matches-torch[ddp]
    # (known where thunderfx cannot run on this torch).
    thunderfx_known = TORCH_2_12_THUNDERFX.holds_here()
    for said in ("4 passed", "1 xfailed") if thunderfx_known else ("5 passed",):
        assert output.count(said) == 2, output[-4000:]
    assert output.count("teparity: world size 2, backend gloo") == 2, output[-4000:]
    assert not (tmp_path / "store").exists()
    environment = json.loads(report.read_text())["environment"]  # rank 0 writes it
    assert (environment["world_size"], environment["backend"]) == (2, "gloo")
