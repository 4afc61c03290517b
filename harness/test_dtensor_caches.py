"""A warm rank regrouped between runs (``teparity.launch.rank.join_group`` destroys its groups) must not reuse DTensor
specs cached under the old groups (``teparity.inrank.task.clear_dtensor_caches``). Two spawned gloo ranks on the CPU:
a first group life computes on a DTensor over its second group; the next life has one group; without the reset,
DTensor's cached spec names the destroyed group."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from harness import REPO

SRC = REPO / "src"
SCRIPT = textwrap.dedent(
    """
    import sys
    import torch, torch.distributed as dist, torch.multiprocessing as mp
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Shard, distribute_tensor

    def life(rank, groups, init_file):
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
        try:  # a life that raises still destroys its groups: gloo threads left at exit abort the rank
            group = [dist.new_group([0, 1]) for _ in range(groups)][-1]
            doubled = distribute_tensor(torch.ones(4, 2), DeviceMesh.from_group(group, "cpu"), [Shard(0)]) * 2
            return doubled.full_tensor().sum().item()
        finally:
            dist.destroy_process_group()

    def main(rank, reset, init_files):
        sys.path.insert(0, SRC)
        life(rank, 2, init_files[0])
        if reset:
            from teparity.inrank.task import reset_between_runs
            reset_between_runs()
        try:
            said = f"{rank} total {life(rank, 1, init_files[1])}"
        except RuntimeError as error:
            said = f"{rank} error {error}"
        sys.stdout.write(said + "\\n")  # one write: the two ranks' lines do not interleave
        sys.stdout.flush()

    if __name__ == "__main__":
        mp.spawn(main, args=(sys.argv[1] == "reset", sys.argv[2:4]), nprocs=2)
    """
)


def _second_life(tmp_path: Path, reset: bool) -> str:
    script = tmp_path / "lives.py"
    script.write_text(f"SRC = {str(SRC)!r}\n{SCRIPT}")
    mode = "reset" if reset else "keep"
    init_files = [str(tmp_path / f"group-{life}") for life in (1, 2)]  # file:// rendezvous, as the gate's ranks'
    done = subprocess.run([sys.executable, str(script), mode, *init_files], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("reset", [True, False])
def test_a_regrouped_rank_reset_between_runs_resolves_its_new_group(tmp_path: Path, reset: bool) -> None:
    out = _second_life(tmp_path, reset)
    if reset:
        assert out.count("total 16.0") == 2, out
    else:  # what the reset prevents, on this torch
        assert out.count("Could not resolve the process group registered under the name 2") == 2, out
