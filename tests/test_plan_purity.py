"""Templates are pure: importing pyhccl.plan pulls in neither mpi4py nor pyhccl's runtimes."""

import subprocess
import sys


def test_plan_imports_no_runtime():
    code = ("import sys, pyhccl.plan, pyhccl.plan.templates, pyhccl.verify.sim; "
            "bad = [m for m in ('mpi4py', 'pyhccl.run.mpi', 'pyhccl.comm') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
