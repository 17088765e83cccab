"""A stalled rank under PYHCCL_TIMEOUT, in mpiexec jobs of their own: the error, and the abort that ends the job.

One job per case (a timed-out communicator is left in an undefined state). Timeouts are 1 s;
the stalled rank sleeps longer, and in the abort case far longer than the job is given, so a job
that is not aborted fails on the launcher's time limit.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from pyhccl.launch import launch_env, mpiexec_command

#: As in tests/test_mpi_launch.py: waiting ranks sleep instead of busy-polling (CI has 2 cores).
YIELD = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": os.environ.get("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")}


def mpirun(n, *args, timeout, env):
    cmd = [*mpiexec_command(), "-n", str(n), sys.executable, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=launch_env({**YIELD, **env}))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s (hang?)\n{e.stdout}\n{e.stderr}")

SCRIPT = textwrap.dedent("""
    import sys, time
    from mpi4py import MPI
    import numpy as np
    import pyhccl

    stall, warm = float(sys.argv[1]), sys.argv[2] == "warm"
    w = MPI.COMM_WORLD
    c = pyhccl.Communicator(w)                      # settings from PYHCCL_TIMEOUT / PYHCCL_TIMEOUT_ABORT
    x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    if warm:
        c.Allreduce(x, out)                         # the shape is agreed: the stall is met in a plan step
    if w.Get_rank() == 1:
        time.sleep(stall)
    else:
        try:
            c.Allreduce(x, out)
        except pyhccl.CollectiveTimeoutError as e:
            print("TIMEOUT", e, flush=True)
    w.Barrier()
""")


def test_stalled_rank_times_out_in_a_named_step(tmp_path):
    script = tmp_path / "stall.py"
    script.write_text(SCRIPT)
    out = mpirun(2, str(script), "3", "warm", timeout=120, env={"PYHCCL_TIMEOUT": "1", "PYHCCL_TIMEOUT_ABORT": "0"})
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith("TIMEOUT"))
    assert "TIMEOUT rank 0 waited 1 s (PYHCCL_TIMEOUT) in step " in line
    assert "of allreduce algorithm " in line and "still pending: recv from rank 1 into " in line


def test_timeout_aborts_the_job(tmp_path):
    script = tmp_path / "stall.py"
    script.write_text(SCRIPT)
    out = mpirun(2, str(script), "600", "cold", timeout=120, env={"PYHCCL_TIMEOUT": "1"})
    assert out.returncode != 0
    assert "CollectiveTimeoutError: rank 0 waited 1 s (PYHCCL_TIMEOUT) in the algorithm agreement of AllReduce " \
           "of 8 x float32" in out.stderr
    assert "pyhccl: rank 0 aborts the job after a timeout" in out.stderr
