"""launch/: the local launcher runs the benchmark and the topology CLI on emulated layouts.

Each case starts one mpiexec job (at most 8 ranks) with a time limit, as tests/test_mpi_launch.py does.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyhccl.launch import emulated_hosts
from pyhccl.topo import Layout, parse_topo

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / "launch" / "local.py"
TIMEOUT = 300


def local(*args):
    cmd = [sys.executable, str(LOCAL), *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish in {TIMEOUT} s (hang?)\n{e.stdout}\n{e.stderr}")


def test_bench_on_an_emulated_2x4_layout():
    out = local("--topo", "2x4", "--", "python", "-m", "pyhccl.bench", "allreduce",
                "-b", "8", "-e", "4K", "-f", "512", "-n", "1", "-w", "0")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "nranks 8" in out.stdout and "# Out of bounds values : 0 OK" in out.stdout


def test_every_rank_gets_its_coordinates_and_groups_under_mpiexec_6():
    topo = "[[[0,1,2,3],[0,1]]]"
    out = local("-n", "6", "--topo", topo, "--", "python", "-m", "pyhccl.topo", "--json", "--rank", "4")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    got = json.loads(out.stdout)
    lay = Layout(parse_topo(topo))
    assert got["source"] == "PYHCCL_TOPO" and got["spec"] == topo
    assert [(r["super_pod"], r["server"], r["device"], r["groups"]) for r in got["ranks"]] == \
        [(c.super_pod, c.server, c.device, [list(g) for g in lay.groups_of(i)]) for i, c in enumerate(lay.coords)]
    assert got["topo_info"]["server_idx"] == 1 and got["topo_info"]["device_num_per_module"] == 2


def test_presets_list_and_parse():
    out = local("--list")
    assert out.returncode == 0, out.stderr
    names = [line.split()[0] for line in out.stdout.splitlines()]
    assert names == sorted(p.stem for p in (ROOT / "launch" / "presets").glob("*.json"))
    for name in ("2x4", "single-server-mesh", "ubx-mesh-clos", "asym-4+2", "3-level"):
        assert name in names


@pytest.mark.parametrize("args, match", [
    (["-n", "6", "--topo", "2x4"], "expecting -n 8 for topo 1x2x4"),
    (["--topo", "2x5"], "neither a preset .* nor a valid spec"),
    ([], "expecting --topo PRESET|SPEC .* or --hosts H"),
    (["--hosts", "2"], "expecting -n N with --hosts and no --topo"),
    (["-n", "2", "--hosts", "3"], r"--hosts: expecting 1 <= hosts <= 2"),
])
def test_usage_errors(args, match):
    out = local(*args)
    assert out.returncode == 2 and re.search(match, out.stderr), out.stderr


def test_dry_run_sets_pyhccl_topo():
    out = local("--topo", "1x1x8;level0=mesh+clos", "--dry-run", "--", "python", "x.py")
    assert out.returncode == 0
    assert out.stdout.startswith("PYHCCL_TOPO='1x1x8;level0=mesh+clos' ") and " -n 8 " in out.stdout


def test_emulated_hosts_arguments():
    assert emulated_hosts(3, 8) == (["-launcher", "fork", "-hosts", "host0:3,host1:3,host2:2"], {})
    assert emulated_hosts(2, 4, "round-robin") == ([], {"MPIR_CVAR_NUM_CLIQUES": "2"})
    with pytest.raises(ValueError, match=r"expecting placement in \('block', 'round-robin'\), got 'cyclic'"):
        emulated_hosts(2, 4, "cyclic")
    out = local("-n", "4", "--hosts", "2", "--placement", "round-robin", "--dry-run", "--", "python", "x.py")
    assert out.returncode == 0 and out.stdout.startswith("MPIR_CVAR_NUM_CLIQUES=2 ") and " -n 4 " in out.stdout


def test_round_robin_hosts_detected_with_both_numberings():
    """MPICH's cliques: ranks {0, 2} on one host, {1, 3} on the other; HCCL's numbering goes host by host."""
    out = local("-n", "4", "--hosts", "2", "--placement", "round-robin", "--", "python", "-m", "pyhccl.topo",
                "--json", "--rank", "2")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    got = json.loads(out.stdout)
    assert (got["source"], got["spec"], got["order"]) == ("MPI", "1x2x2", [0, 2, 1, 3])
    assert got["levels"][0]["mpi_groups"] == [[0, 2], [1, 3]] and got["levels"][0]["groups"] == [[0, 1], [2, 3]]
    assert [r["mpi_rank"] for r in got["ranks"]] == [0, 2, 1, 3]
    assert got["topo_info"]["server_idx"] == 0 and got["topo_info"]["user_rank"] == 1     # MPI rank 2 = HCCL rank 1


def test_slurm_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(ROOT / "launch" / "slurm.sbatch")]).returncode == 0
