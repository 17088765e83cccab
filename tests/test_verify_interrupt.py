"""A sweep stopped early (Ctrl-C, a worker killed): the workers end at once and what finished is reported."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

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


@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_reports_what_finished_and_leaves_no_worker(jobs):
    rc, out, err = _sweep(["-m", "pyhccl.verify", "all", "--ranks", "24-40", "-j", str(jobs)], interrupt=True)
    assert rc == 130, err[-2000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith("# INTERRUPTED after ") and " tasks done, " in last and "none failed" in last, last
    assert "op " in out and "algorithm" in out            # the summary table of the tasks that finished


def test_a_worker_that_dies_ends_the_sweep_with_what_finished():
    rc, out, err = _sweep(["-c", _DIES])
    assert rc == 1, err[-2000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith("# ABORTED after ") and "a worker process died" in last, last


def test_stopping_early_leaves_no_thread_behind(monkeypatch):
    """The pool's manager thread has ended when the sweep stops: at exit Python writes to that thread's wake-up pipe
    while it is still running, and the thread closes it ("OSError: Bad file descriptor" after Ctrl-C, in CI)."""
    import pyhccl.verify.sweep as sweep

    def run_task(task):                  # forked workers inherit this: the first task ends, the second never does
        if task.topo != "1x1x2":
            time.sleep(600)
        return sweep.Outcome(task, 2)

    monkeypatch.setattr(sweep, "run_task", run_task)
    before = set(threading.enumerate())
    outcomes = sweep.run_tasks([sweep.Task("allreduce", "Ring", "1x1x2"), sweep.Task("allreduce", "Ring", "1x1x3")],
                               jobs=2, ordered=False)
    assert next(outcomes).task.topo == "1x1x2"
    outcomes.close()                     # the caller stops reading, as a Ctrl-C does
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []
    assert multiprocessing.active_children() == []


def _sweep(args: list[str], interrupt: bool = False) -> tuple[int, str, str]:
    """Run ``python args`` in a process group of its own (with ``interrupt``: Ctrl-C to the group once the
    first task has finished); its status and output, once no process of the group is left (no traceback)."""
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_interruptible)
    try:
        if interrupt:
            first = proc.stderr.readline()          # the first progress line: a task has finished
            assert first.startswith("# 1/"), first
            time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGINT)      # as a terminal's Ctrl-C: the whole process group
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "Traceback" not in err, err[-2000:]
    assert _group_ends(proc.pid), "a worker process outlived the sweep"
    return proc.returncode, out, err


def _interruptible() -> None:
    """In the child: Ctrl-C's default action, as a terminal's foreground job has it. A test run started in the
    background of a non-interactive shell (``cmd &``) inherits SIGINT ignored, and Python keeps it so."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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


def test_each_task_of_a_batch_is_reported_as_it_finishes(monkeypatch, tmp_path):
    """A sweep's tasks of one op on one machine run in one worker, one after another (they share plans): the parent
    hears of each as it finishes, not of the batch at its end (a super pod's batch runs for many minutes)."""
    import pyhccl.verify.sweep as sweep
    heard = tmp_path / "heard"

    def run_task(task):                  # forked workers inherit this: the second waits until the first is heard of
        out = sweep.Outcome(task, 2)
        if task.counts == (2,):
            deadline = time.monotonic() + 60
            while not heard.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            out.statuses["heard first"] = heard.exists()
        return out

    monkeypatch.setattr(sweep, "run_task", run_task)
    tasks = [sweep.Task("allreduce", "Ring", "1x1x2", counts=(c,)) for c in (1, 2)]
    for ordered in (False, True):
        heard.unlink(missing_ok=True)
        outcomes = sweep.run_tasks(tasks, jobs=2, ordered=ordered)
        assert next(outcomes).task.counts == (1,)
        heard.touch()
        second = next(outcomes)
        assert second.task.counts == (2,) and second.statuses["heard first"]
        assert list(outcomes) == []


def test_in_task_order_across_batches_that_finish_out_of_order(monkeypatch, tmp_path):
    import pyhccl.verify.sweep as sweep
    done = tmp_path / "second batch done"

    def run_task(task):                  # the first machine's batch waits until the second's has finished
        out = sweep.Outcome(task, 2)
        if task.topo == "1x1x3" and task.algo == "NHR":
            done.touch()
        deadline = time.monotonic() + 60
        while task.topo == "1x1x2" and not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        out.statuses["after the second batch"] = done.exists()
        return out

    monkeypatch.setattr(sweep, "run_task", run_task)
    tasks = [sweep.Task("allreduce", a, t) for t in ("1x1x2", "1x1x3") for a in ("Ring", "NHR")]
    for ordered in (True, False):
        done.unlink(missing_ok=True)
        outcomes = list(sweep.run_tasks(tasks, jobs=2, ordered=ordered))
        assert all(o.statuses["after the second batch"] for o in outcomes if o.task.topo == "1x1x2")
        if ordered:
            assert [o.task for o in outcomes] == tasks
        else:
            assert outcomes[0].task == tasks[2]         # the second batch's first task came first
