"""Runs the MPI test suite, the benchmark and a drop-in script under mpiexec at several rank counts.

This is how a plain ``pytest`` covers the MPI tests: each case starts one ``mpiexec`` job
(the launcher pip installed beside this Python, or ``PYHCCL_MPIEXEC``) with a time limit, so
a hang fails the test instead of stalling the run.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pyhccl.launch import launch_env, mpiexec_command
from pyhccl.comm import SUPPORTED_DTYPES
from pyhccl.plan import ALLREDUCE_ALGOS

HERE = Path(__file__).parent
TIMEOUT = 600
#: MPICH busy-polls while a rank waits; with more ranks than cores (CI has 2) the waiting rank
#: holds the core its peer needs, and every step costs a scheduler time slice. Heavy yield makes
#: the wait sleep instead: the MPI tests run 3-4x faster and nothing else changes. Open MPI
#: ignores the variable; a value already in the environment wins.
YIELD = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": os.environ.get("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")}


def mpirun(n, *args, timeout=TIMEOUT, cwd=None):
    cmd = [*mpiexec_command(), "-n", str(n), sys.executable, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=launch_env(YIELD))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s (hang?)\n{e.stdout}\n{e.stderr}")


#: ``(ranks, marker expression)`` of each run of tests/mpi. The fast runs (the README's command)
#: cover 1-4 ranks, 3 a non-power of two, without the tests marked ``slow`` (the 8-rank layout
#: matrix); the ``slow`` runs (``pytest -m slow``, which CI runs too) run everything at 5 and 8.
#: A test in tests/mpi marked ``slow`` therefore runs at 5 and 8 ranks only.
SUITE = [*(pytest.param(n, "not slow", id=f"{n}") for n in (1, 2, 3, 4)),
         *(pytest.param(n, "", id=f"{n}-all", marks=pytest.mark.slow) for n in (5, 8))]


@pytest.mark.parametrize("n,select", SUITE)
def test_mpi_suite(n, select):
    out = mpirun(n, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--with-mpi", "-m", select, str(HERE / "mpi"))
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]


@pytest.mark.slow
def test_bench_allreduce_every_dtype_op_algo():
    out = mpirun(3, "-m", "pyhccl.bench", "allreduce", "-b", "8", "-e", "4K", "-f", "64",
                 "-n", "1", "-w", "0", "-o", "all", "-d", "all", "--algo", "auto,all")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    assert "# Out of bounds values : 0 OK" in out.stdout
    rows = [l for l in out.stdout.splitlines() if l and not l.startswith("#")]
    per_algo = 2 * 4 * len(SUPPORTED_DTYPES)                   # sizes x ops x dtypes
    assert len(rows) % per_algo == 0 and len(rows) >= per_algo * (len(ALLREDUCE_ALGOS) + 1)   # auto, templates, HCCL


def test_bench_usage_error_exits_2_and_prints_once():
    out = mpirun(2, "-m", "pyhccl.bench", "allreduce", "--algo", "NHRR")
    assert out.returncode == 2
    assert out.stderr.count("unknown algorithm 'NHRR'") == 1


def test_drop_in_replacement(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        from mpi4py import MPI
        import numpy as np
        import pyhccl

        comm = pyhccl.Communicator(MPI.COMM_WORLD)      # was: comm = MPI.COMM_WORLD
        a = np.full(1000, comm.Get_rank(), dtype=np.float64)
        b = np.empty_like(a)
        comm.Allreduce(a, b)
        assert (b == sum(range(comm.Get_size()))).all()
        comm.Allreduce(MPI.IN_PLACE, a, op=MPI.MAX)
        assert (a == comm.Get_size() - 1).all()
        n, r = comm.Get_size(), comm.Get_rank()
        c = np.arange(3, dtype=np.int32) if r == 0 else np.zeros(3, np.int32)
        comm.Bcast(c, root=0)
        g = np.empty(3 * n, np.int32)
        comm.Allgather(c + r, g)
        assert (g.reshape(n, 3) == np.arange(3) + np.arange(n)[:, None]).all()
        part = np.empty(3, np.int32)
        comm.Reduce_scatter_block(g, part)
        assert (part == n * (np.arange(3) + r)).all()
        comm.Barrier()
        if comm.Get_rank() == 0:
            print("drop-in ok", comm.fallbacks)
    """))
    out = mpirun(4, str(script))
    assert out.returncode == 0 and "drop-in ok 0" in out.stdout, out.stdout + out.stderr
