"""``python -m pyhccl.bench <op>``: every op in one process, a wrong result, usage errors, and 2 ranks under mpiexec."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.bench import COMMANDS, main
from pyhccl.launch import launch_env, mpiexec_command
from pyhccl.core.call import OPS

QUICK = ["-b", "96", "-e", "96", "-n", "1", "-w", "0"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_op_runs_and_checks_on_one_rank(name, capsys):
    assert main([name, *QUICK], MPI.COMM_SELF) == 0
    out = capsys.readouterr().out
    assert "# Out of bounds values : 0 OK" in out and f"pyhccl.bench {name}:" in out


def test_rounds_keep_each_algorithms_fastest(monkeypatch, capsys):
    """--rounds 3: every algorithm and native MPI timed three times, round-robin; the fastest counts."""
    from pyhccl.bench import collective
    seen = []

    def fake(comm, fn, iters, warmup, budget=None, blocks=1):
        seen.append(fn)
        return [5e-3, 2e-3, 9e-3][(len(seen) - 1) // 3]     # per round: native, Ring, NHR share the round's time
    monkeypatch.setattr(collective, "time_call", fake)
    assert main(["allreduce", "--algo", "Ring,NHR", "--no-inplace", "-b", "96", "-e", "96", "--rounds", "3",
                 "--json", "/dev/null"], MPI.COMM_SELF) == 0
    assert len(seen) == 9
    rows = [l.split() for l in capsys.readouterr().out.splitlines() if l.strip().startswith("96")]
    assert [r[-3] for r in rows] == ["Ring", "NHR"] and all(float(r[5]) == 2000.0 for r in rows)


def test_wrong_data_is_counted_and_exits_1(monkeypatch, capsys):
    real = pyhccl.Communicator.Allgather

    def corrupt(self, sendbuf, recvbuf):
        real(self, sendbuf, recvbuf)
        np.asarray(recvbuf).reshape(-1)[-1] += 1

    monkeypatch.setattr(pyhccl.Communicator, "Allgather", corrupt)
    assert main(["allgather", *QUICK], MPI.COMM_SELF) == 1
    out = capsys.readouterr().out               # out of place and in place, of HCCL's choice and the fast one
    assert "# Out of bounds values : 4 FAILED" in out
    labels = [w for line in out.splitlines() if line[:1] == " " for w in line.split() if w[:5] in ("auto:", "fast:")]
    assert labels == ["auto:AicpuAllGatherSoleMesh", "fast:Mesh@shm"]


@pytest.mark.parametrize("argv, match", [
    (["allgather", "--algo", "NHRR"], "unknown algorithm 'NHRR' for all_gather"),
    (["broadcast", "-r", "3"], "expecting -r root in range(1), got 3"),
    (["alltoal"], "unknown benchmark 'alltoal'"),
    (["allreduce", "--rounds", "0"], "expecting --rounds >= 1, got 0"),
])
def test_usage_errors_exit_2(argv, match, capsys):
    assert main(argv, MPI.COMM_SELF) == 2
    assert match in capsys.readouterr().err


_SCRIPT = textwrap.dedent("""
    import sys
    from pyhccl.bench import main
    out = sys.argv[1]
    quick = ["-b", "1K", "-e", "64K", "-f", "64", "-n", "1", "-w", "0"]
    runs = [["allreduce", "--algo", "auto,NHR", "-o", "all"], ["allgather", "--algo", "auto,all"],
            ["reducescatter"], ["broadcast", "-r", "1"], ["gather", "-r", "1"], ["alltoallv"],
            ["allreduce", "--algo", "MeshTwoShot@shm,auto", "--buffers", "shared", "--rounds", "2"],
            ["allgatherv", "--algo", "Ring@shm,Mesh", "--buffers", "shared"]]
    status = 0
    for argv in runs:
        name = argv[0] + ("_shared" if "--buffers" in argv else "")
        status |= main(argv + quick + ["--json", f"{out}/{name}.json", "--topo", "1x1x2"])
    sys.exit(status)
""")


def test_benchmarks_at_two_ranks(tmp_path):
    script = tmp_path / "bench.py"
    script.write_text(_SCRIPT)
    cmd = [*mpiexec_command(), "-n", "2", sys.executable, str(script), str(tmp_path)]
    env = launch_env({"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"})
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert out.stdout.count("# Out of bounds values : 0 OK") == 8
    ops = {"allreduce": "allreduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
           "broadcast": "broadcast", "gather": "gather", "alltoallv": "alltoallv"}
    for name, op in ops.items():
        data = json.load(open(tmp_path / f"{name}.json"))
        assert data["meta"]["nranks"] == 2 and data["meta"]["topo"] == "1x1x2"
        rows = data["rows"]
        assert rows and all(r["wrong"] == 0 and r["ip_wrong"] in (0, None) for r in rows)
        for r in rows:                              # nccl-tests' bus bandwidth factor of the op
            if r["algbw"]:
                assert r["busbw"] == pytest.approx(r["algbw"] * OPS[op].busbw_factor(2))
            assert r["native_time_us"] is not None
    ar = json.load(open(tmp_path / "allreduce.json"))["rows"]
    assert {r["redop"] for r in ar} == {"sum", "prod", "max", "min"} and {r["algo"] for r in ar} >= {"NHR"}
    assert any(r["algo"].startswith("auto:") for r in ar)
    ag = {r["algo"] for r in json.load(open(tmp_path / "allgather.json"))["rows"]}
    assert {"Mesh", "NHR", "Ring"} <= ag and len(ag) > 4            # templates and eligible HCCL names
    for name, algos in (("allreduce_shared", {"MeshTwoShot@shm"}), ("allgatherv_shared", {"Ring@shm", "Mesh"})):
        data = json.load(open(tmp_path / f"{name}.json"))       # on alloc_shared arrays, checked
        assert data["meta"]["buffers"] == "shared" and algos <= {r["algo"] for r in data["rows"]}
        assert all(r["wrong"] == 0 and r["ip_wrong"] in (0, None) and r["native_time_us"] for r in data["rows"])
    bc = json.load(open(tmp_path / "broadcast.json"))["rows"]
    assert all(r["root"] == 1 and r["ip_time_us"] is None for r in bc)     # Bcast: one buffer, one column
