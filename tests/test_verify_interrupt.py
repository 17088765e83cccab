"""Ctrl-C during ``python -m pyhccl.verify all``: the workers stop at once and what finished is reported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_reports_what_finished_and_leaves_no_worker(jobs):
    proc = subprocess.Popen([sys.executable, "-m", "pyhccl.verify", "all", "--ranks", "24-40", "-j", str(jobs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = proc.stderr.readline()          # the first progress line: a task has finished
        assert first.startswith("# 1/"), first
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)      # as a terminal's Ctrl-C: the whole process group
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    last = out.strip().splitlines()[-1]
    assert last.startswith("# INTERRUPTED after ") and " tasks done, " in last and "none failed" in last, last
    assert "op " in out and "algorithm" in out            # the summary table of the tasks that finished
    assert _group_ends(proc.pid), "a worker process outlived the interrupted sweep"


def _group_ends(pgid: int, seconds: float = 10.0) -> bool:
    """Whether every process of group ``pgid`` (the sweep's workers) has ended within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


_DIES = """
import os, sys
import pyhccl.verify.sweep as sweep
from pyhccl.verify.cli import main
real = sweep.run_task
def run_task(task):
    if task.topo == "1x1x30":
        os._exit(9)                      # as the OOM killer would end a worker
    return real(task)
sweep.run_task = run_task
sys.exit(main(["all", "--ranks", "28-32", "-j", "2"]))
"""


def test_a_worker_that_dies_ends_the_sweep_with_what_finished():
    proc = subprocess.Popen([sys.executable, "-c", _DIES], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, err[-2000:]
    assert "Traceback" not in err
    last = out.strip().splitlines()[-1]
    assert last.startswith("# ABORTED after ") and "a worker process died" in last, last
    assert _group_ends(proc.pid), "a worker process outlived the aborted sweep"
