"""Emulated hosts: tests/mpi/test_placement.py on 2-4 hosts, block and round-robin, with and without PYHCCL_TOPO.

MPICH makes one machine look like several hosts (pyhccl.launch.emulated_hosts: hydra's fork launcher
with ``-hosts`` for block placement, ``MPIR_CVAR_NUM_CLIQUES`` / ``MPIR_CVAR_ODD_EVEN_CLIQUES`` for
round-robin). Every run of one size and host count is the same job under other rank names: each
checks its topology and every collective against numpy, and the runs' results (in place order)
and selected algorithms must be identical, bit for bit.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pyhccl.launch import emulated_hosts, launch_env, mpiexec_command

HERE = Path(__file__).parent
TIMEOUT = 600



@pytest.fixture(autouse=True, scope="module")
def mpich():
    version = subprocess.run([mpiexec_command()[0], "--version"], capture_output=True, text=True, timeout=60).stdout
    if "HYDRA" not in version:
        pytest.skip("emulated hosts need MPICH's hydra launcher")


def run(tmp_path, name, n, hosts, placement, extra=()):
    """One job of test_placement.py; returns its results by place (and the algorithms).

    ``placement``: block or round-robin (pyhccl.launch.emulated_hosts), or odd-even (MPIR_CVAR_ODD_EVEN_CLIQUES).
    """
    dump = tmp_path / name
    dump.mkdir()
    args, env = ([], {"MPIR_CVAR_ODD_EVEN_CLIQUES": "1"}) if placement == "odd-even" else \
        emulated_hosts(hosts, n, placement)
    env.update({"PLACEMENT_DUMP": str(dump), "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1", **dict(extra)})
    cmd = [*mpiexec_command(), "-n", str(n), *args, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "--with-mpi", str(HERE / "mpi" / "test_placement.py")]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=launch_env(env))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name}: {' '.join(cmd)} did not finish in {TIMEOUT} s (hang?)\n{e.stdout}\n{e.stderr}")
    assert out.returncode == 0, f"{name} ({env}):\n" + out.stdout[-6000:] + out.stderr[-3000:]
    got = []
    for h in range(n):
        with np.load(dump / f"{h}.npz") as f:
            got.append({k: f[k].tobytes() if k != "algos" else json.loads(str(f[k])) for k in f.files})
    return got


def same_job(runs):
    """Every run's results equal the first's, bit for bit, place by place, and so do the algorithms."""
    (first_name, first), *rest = runs.items()
    for name, got in rest:
        for h, (a, b) in enumerate(zip(first, got)):
            assert a.keys() == b.keys(), (first_name, name, h)
            for key in a:
                assert a[key] == b[key], f"{name} differs from {first_name} at place {h}: {key}"


def test_four_ranks_on_two_hosts(tmp_path):
    same_job({
        "block": run(tmp_path, "block", 4, 2, "block"),
        "round-robin": run(tmp_path, "rr", 4, 2, "round-robin"),
        "round-robin + PYHCCL_TOPO": run(tmp_path, "rr-topo", 4, 2, "round-robin", [("PYHCCL_TOPO", "1x2x2")]),
    })


def test_six_ranks_on_three_hosts(tmp_path):
    same_job({
        "block": run(tmp_path, "block", 6, 3, "block"),
        "round-robin": run(tmp_path, "rr", 6, 3, "round-robin"),
    })


@pytest.mark.slow
def test_six_ranks_on_two_hosts(tmp_path):
    same_job({
        "block": run(tmp_path, "block", 6, 2, "block"),
        "round-robin": run(tmp_path, "rr", 6, 2, "round-robin"),
        "round-robin + PYHCCL_TOPO": run(tmp_path, "rr-topo", 6, 2, "round-robin", [("PYHCCL_TOPO", "1x2x3")]),
    })


@pytest.mark.slow
@pytest.mark.parametrize("hosts", [2, 4])
def test_eight_ranks(tmp_path, hosts):
    runs = {"block": run(tmp_path, "block", 8, hosts, "block"),
            "round-robin": run(tmp_path, "rr", 8, hosts, "round-robin")}
    if hosts == 2:
        runs["round-robin + PYHCCL_TOPO"] = run(tmp_path, "rr-topo", 8, 2, "round-robin", [("PYHCCL_TOPO", "1x2x4")])
        runs["odd-even"] = run(tmp_path, "odd-even", 8, 2, "odd-even")
    same_job(runs)


@pytest.mark.slow
def test_eight_ranks_on_three_uneven_hosts(tmp_path):
    """Hosts of 3, 3 and 2 ranks (round-robin: {0,3,6} {1,4,7} {2,5}); the two-level cases skip (unequal servers)."""
    same_job({"block": run(tmp_path, "block", 8, 3, "block"), "round-robin": run(tmp_path, "rr", 8, 3, "round-robin")})
