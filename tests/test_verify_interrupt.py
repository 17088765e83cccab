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
    deadline = time.monotonic() + 10
    while True:                                           # every worker of the group has ended
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a worker process outlived the interrupted sweep"
        time.sleep(0.1)
