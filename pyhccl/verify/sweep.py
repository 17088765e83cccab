"""The sweep behind ``python -m pyhccl.verify``: (op, algorithm, machine) tasks, run in worker processes.

A task verifies one algorithm (or HCCL's selection, "auto") on one machine over every call
of :func:`~pyhccl.verify.cases.calls`, and returns an :class:`Outcome` that counts the
statuses and keeps the first failures and reasons.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from ..core.call import OPS, canonical_op
from ..plan.api import flat_names, hccl_names, resolve_name
from .api import VerifyResult, check, hccl_op_name, machine, no_call
from .cases import calls
from .memory import MemoryBudgetError

__all__ = ["AUTO", "Task", "Outcome", "expand_algos", "make_tasks", "run_tasks", "default_jobs"]

#: The label of HCCL's selection in the tables.
AUTO = "auto"
#: Failures kept per outcome (the rest are only counted).
_KEEP_FAILURES = 3
#: Up to this many ranks a call gets the plain timeout; above, the timeout grows with N^2 (a mesh's cost).
_TIMEOUT_RANKS = 32


@dataclass(frozen=True)
class Task:
    """Verify ``algo`` (a name, or :data:`AUTO`) for ``op`` on ``topo`` over the sweep's calls."""

    op: str
    algo: str
    topo: str
    counts: tuple[int, ...] | None = None
    places: str = "both"           # "both" | "out" | "in"
    dtype: str = "FP32"
    reduce_op: str = "sum"
    expansion_mode: str | None = None
    flat: bool = False             # topo came from --ranks (pyhccl's templates run there)
    timeout: float | None = None   # seconds per call up to 32 ranks, times (N/32)^2 above


@dataclass
class Outcome:
    """What one task found."""

    task: Task
    nranks: int
    statuses: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    rounds: int = 0
    bytes: int = 0
    failures: list[VerifyResult] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)     # status -> first reason
    picked: Counter = field(default_factory=Counter)           # auto: algorithm -> calls

    @property
    def ran(self) -> int:
        """Calls that built and simulated (passed or failed)."""
        return self.statuses["ok"] + self.statuses["failed"]

    def add(self, res: VerifyResult) -> None:
        self.statuses[res.status] += 1
        self.seconds += res.seconds
        if res.ok:
            self.rounds = max(self.rounds, res.rounds or 0)
            self.bytes = max(self.bytes, res.bytes or 0)
        elif res.status == "failed":
            if len(self.failures) < _KEEP_FAILURES:
                self.failures.append(res)
        else:
            self.reasons.setdefault(res.status, res.error)
        if self.task.algo == AUTO and res.algorithm and res.status in ("ok", "failed", "not-runnable"):
            self.picked[res.algorithm] += 1


def expand_algos(op: str, tokens: Sequence[str]) -> list[str]:
    """The names ``--algo`` selects for ``op``: ``all``, ``templates``, ``hccl``, ``auto`` or names.

    Names that belong to another op are skipped (so ``--algo NHR`` works across ops).
    """
    out: list[str] = []
    for t in tokens:
        key = t.lower()
        if key in ("all", "templates"):
            out += flat_names(op)
        if key in ("all", "hccl"):
            out += hccl_names(op)
        if key in ("all", AUTO):
            out.append(AUTO)
        if key not in ("all", "templates", "hccl", AUTO):
            try:
                out.append(resolve_name(op, t))
            except ValueError:
                pass
    return list(dict.fromkeys(out))


def make_tasks(ops: Iterable[str], algos: Sequence[str], flat: Sequence[str], topos: Sequence[str],
               **common) -> list[Task]:
    """Tasks for every op x algorithm x machine: templates on the flat machines, HCCL names everywhere."""
    tasks = []
    for op in ops:
        names = expand_algos(op, algos)
        templates = set(flat_names(op))
        for topo in list(flat) + list(topos):
            is_flat = topo in flat
            tasks += [Task(op, a, topo, flat=is_flat, **common) for a in names if is_flat or a not in templates]
    return tasks


def run_task(task: Task) -> Outcome:
    """Verify ``task`` over its calls."""
    m = machine(task.topo)
    out = Outcome(task, m.nranks)
    hop = hccl_op_name(task.op)
    timeout = task.timeout and task.timeout * max(1.0, (m.nranks / _TIMEOUT_RANKS) ** 2)
    try:
        todo = calls(task.op, m.nranks, task.counts, in_place=task.places != "out")
    except MemoryBudgetError as e:          # (AlltoAllV's matrices at thousands of ranks): one failure says why
        out.add(no_call(task.op, m, None if task.algo == AUTO else task.algo, e))
        return out
    for call in todo:
        if task.places == "in" and not call.in_place:
            continue
        algo = None if task.algo == AUTO else task.algo
        out.add(check(call, algo, m, dtype=task.dtype, reduce_op=task.reduce_op,
                      expansion_mode=task.expansion_mode, hccl_op=hop, timeout=timeout))
    return out


def default_jobs() -> int:
    """Worker processes: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_tasks(tasks: Sequence[Task], jobs: int = 1, *, ordered: bool = True) -> Iterator[Outcome]:
    """Outcomes in task order (``ordered=False``: as workers finish them, each naming its task);
    ``jobs > 1`` runs them in that many forked worker processes.

    Consecutive tasks of one op on one machine go to the same worker, so that the algorithms
    among them that build equal plans are simulated once (:func:`~pyhccl.verify.api.check`). Each
    task's outcome comes back as it finishes, not with the rest of its batch (a super pod's batch
    runs for many minutes). Workers ignore Ctrl-C; if the caller stops reading (Ctrl-C, a worker
    that died) the batches not started are cancelled and the workers ended at once.
    """
    if jobs <= 1 or len(tasks) <= 1:
        yield from map(run_task, tasks)
        return
    batches: list[list[tuple[int, Task]]] = []
    for i, t in enumerate(tasks):
        if batches and (batches[-1][0][1].op, batches[-1][0][1].topo) == (t.op, t.topo):
            batches[-1].append((i, t))
        else:
            batches.append([(i, t)])
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_start_worker, initargs=(out,))
    finished = False
    try:
        futures = [pool.submit(_run_batch, b) for b in batches]
        held: dict[int, Outcome] = {}       # (ordered: the outcomes that came before those ahead of them)
        due = 0                             # (ordered: the next task's index)
        for _ in tasks:
            while True:
                try:
                    i, got = out.get(timeout=_POLL)
                    break
                except queue.Empty:         # a worker that died or raised: its batch's future says so
                    for f in futures:
                        if f.done():
                            f.result()
            if not ordered:
                yield got
                continue
            held[i] = got
            while due in held:
                yield held.pop(due)
                due += 1
        finished = True
    finally:
        if finished:
            pool.shutdown()
        else:                   # interrupted (Ctrl-C), or the caller stopped reading: stop the workers now
            _stop(pool)


#: A worker's queue for each task's outcome as it finishes, with the task's index.
_OUT: list = [None]
_POLL = 0.5                 # seconds between looks at the workers while no outcome comes


def _run_batch(batch: list[tuple[int, Task]]) -> None:
    for i, t in batch:
        _OUT[0].put((i, run_task(t)))


def _start_worker(out) -> None:
    """In a worker: Ctrl-C reaches the whole process group; the parent alone handles it (:func:`_stop`). ``out``:
    where each task's outcome goes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _OUT[0] = out


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel the batches not started and end the workers at once (a batch may run for minutes)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())    # Python < 3.14 has no terminate_workers
    # the pool's manager thread closes its wake-up pipe as it ends; at exit Python writes to that pipe if the thread
    # has not ended yet (a race that printed "OSError: Bad file descriptor" after Ctrl-C): wait for it below. Taken
    # before shutdown(), which drops the pool's reference to it.
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        w.terminate()
    for w in workers:
        w.join(5)
    if manager is not None:
        manager.join(30)


def canonical_ops(text: str) -> list[str]:
    """``--op`` text (comma-separated, any naming; ``all``) to pyhccl's op names."""
    if text.strip().lower() == "all":
        return list(OPS)
    return list(dict.fromkeys(canonical_op(t.strip()) for t in text.split(",") if t.strip()))
