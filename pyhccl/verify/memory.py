"""The verifier's memory guard: a call too large to build or simulate raises a clear error, not the OOM killer.

At a hundred thousand ranks the plans (Python objects) and the simulator's atom grid (numpy arrays)
can outgrow the machine; Linux then kills the process with SIGKILL, and nothing says why. The
simulator and :func:`~pyhccl.verify.verify` estimate what they will need before the large
allocations (bytes per action, per atom, per rank, measured on runs at 1024-8192 ranks) and
compare it with the memory the process may use: ``PYHCCL_VERIFY_MEMORY`` (GiB) when set, else on
Linux the memory the kernel reports available plus what this process holds already, bounded by
``RLIMIT_AS`` and the cgroup's limit; elsewhere no check is made.
"""

from __future__ import annotations

import os
import resource
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..core import settings
from ..plan.shared import action_count
from .heap import free_bytes

__all__ = ["MemoryBudgetError", "task", "budget", "resident", "require", "require_moves", "require_matrices",
           "BuildGuard", "BUILD_CHECK_RANKS", "MIN_CHECK_BYTES", "BYTES_PER_ACTION", "BYTES_PER_MATRIX_ENTRY",
           "BYTES_PER_POST_ROW", "CUT_BYTES_PER_END", "RUN_BYTES_PER_ATOM", "STEP_BYTES_PER_ATOM",
           "STEP_BYTES_PER_NEW_ATOM"]

_GIB = 2**30
#: Plans built between two looks at the process's memory (a look costs a few microseconds).
BUILD_CHECK_RANKS = 1024
#: Before the first look, the actions a rank are looked at from this many ranks on, at each power of two.
_EARLY_RANKS = 4
# What the simulator (pyhccl.verify.sim) needs, in bytes, measured at 1024-8192 ranks (docs/verify.md#memory):
#: per action of the plans, flattened into rows with their checks (measured 254-312), and their regions listed
#: for the grid's cuts (about 64 more)
BYTES_PER_ACTION = 384
#: per entry of an AlltoAllV send-count matrix held by its call, with its send and receive displacements
#: (Python ints in tuples: measured 115-118 at 1024-2048 ranks)
BYTES_PER_MATRIX_ENTRY = 120
#: per row of the postcondition (pyhccl.verify.post.post_rows; a row per contribution, through Python lists,
#: where no formula applies: measured 128-142)
BYTES_PER_POST_ROW = 160
#: per piece end the grid is cut at (both ends of every piece of every region, and each buffer's): the least
#: that cutting needs (the grid has a quarter to a sixth as many atoms as piece ends, 16-24 bytes each)
CUT_BYTES_PER_END = 6
#: per atom of the grid, for the run, above what the process held before the cut (measured 42-69)
RUN_BYTES_PER_ATOM = 72
#: per atom a step's moves touch (either side, with repeats): the temporaries of pairing and moving them
#: (measured 30-88), and per atom the destination is cut into where its source is finer (measured 132 in all)
STEP_BYTES_PER_ATOM = 104
STEP_BYTES_PER_NEW_ATOM = 48
_SAMPLE_MOVES = 1024            # a step's moves looked up in the grid, evenly spaced, to estimate its atoms
_STEP_CHECK_BYTES = 1 << 28     # a step estimated below this needs no look at the budget
#: any other estimate below this needs none either (small calls read nothing of /proc)
MIN_CHECK_BYTES = 1 << 26
_FIX = ("use a smaller count (--count) or fewer ranks, or set PYHCCL_VERIFY_MEMORY=<GiB> to the memory this "
        "process may use (0: no check)")


class MemoryBudgetError(MemoryError):
    """Building or simulating a call would need more memory than the process may use.

    Attributes:
        need, budget: the estimate and the memory available, in bytes.
    """

    def __init__(self, what: str, need: int, budget: int, source: str) -> None:
        super().__init__(f"{what} needs about {_size(need)} of memory, {_size(budget)} {source}: {_FIX}")
        self.need, self.budget = need, budget


def task(verb: str, call) -> str:
    """``"simulating allreduce over 8192 ranks (count 1000)"``: what needs the memory, for the error."""
    return f"{verb} {call.op} over {call.nranks} ranks" + (f" (count {call.count})" if call.count else "")


def require_moves(what: str, keys: np.ndarray, a, b) -> None:
    """:func:`require` before a step pairs the moves ``a`` -> ``b`` (:class:`~pyhccl.verify.atoms.Moves`) on the
    grid ``keys``: the atoms they touch, from a sample of the moves (each move's pieces lie as its first one),
    at :data:`STEP_BYTES_PER_ATOM`, and more where ``a`` is cut finer than ``b``; the heap's free bytes are
    reused first."""
    n = len(a.rep)
    if not n or STEP_BYTES_PER_ATOM * len(keys) * max(int(a.rep.sum()), int(b.rep.sum())) <= _STEP_CHECK_BYTES:
        return                          # a piece touches at most every atom: too few to matter
    pick = np.linspace(0, n - 1, _SAMPLE_MOVES).astype(np.int64) if n > _SAMPLE_MOVES else slice(None)
    touched = []
    for side in (a, b):
        first, cnt, rep = side.key[pick], side.cnt[pick], side.rep[pick]
        w = np.searchsorted(keys, first + cnt) - np.searchsorted(keys, first)
        touched.append(int((np.maximum(w, 1) * rep).sum()) * n // len(rep))
    more = STEP_BYTES_PER_ATOM * max(touched) + STEP_BYTES_PER_NEW_ATOM * max(0, touched[0] - touched[1])
    if more > _STEP_CHECK_BYTES:
        require(what, more - free_bytes())


def resident() -> int:
    """This process's resident memory in bytes (0 where /proc is missing)."""
    return _statm(1)


def budget() -> tuple[int, str] | None:
    """The bytes this process may hold in all, and where the figure comes from; None: no check.

    Raises:
        ValueError: a bad ``PYHCCL_VERIFY_MEMORY``.
    """
    gib = settings.verify_memory()
    if gib is not None:
        return (int(gib * _GIB), "allowed by PYHCCL_VERIFY_MEMORY") if gib > 0 else None
    try:
        text = Path("/proc/meminfo").read_text()
        at = text.index("MemAvailable:") + len("MemAvailable:")
        avail = int(text[at:text.index("\n", at)].split()[0]) * 1024
    except (OSError, ValueError):
        return None                     # not Linux: no check
    rss = resident()
    bounds = [avail + rss]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:          # address space: what is mapped and not resident counts too
        bounds.append(soft - _statm(0) + rss)
    bounds.append(_cgroup_room() + rss)
    return max(0, min(bounds)), "available"


def require(what: str, more: int) -> None:
    """Raise :class:`MemoryBudgetError` if this process's memory plus ``more`` bytes exceeds :func:`budget`
    (``more`` under 64 MiB is not looked at: small calls pay nothing)."""
    if more < MIN_CHECK_BYTES:
        return
    b = budget()
    need = resident() + more
    if b is not None and need > b[0]:
        raise MemoryBudgetError(what, need, *b)


def require_matrices(op: str, n: int, k: int) -> None:
    """:func:`require` before ``k`` send-count matrices of ``n`` x ``n`` are made for ``op`` (AlltoAllV's calls: a
    sweep's four at 8192 ranks would hold about 25.5 GiB, and the OOM killer end the process)."""
    what = "send-count matrix" if k == 1 else f"{k} send-count matrices"
    require(f"making {op}'s {what} of {n} x {n}", k * n * n * BYTES_PER_MATRIX_ENTRY)


class BuildGuard:
    """Watches plans being built rank by rank: every :data:`BUILD_CHECK_RANKS` ranks, what the process holds,
    plus the growth per rank since the first look times the ranks left, plus what the simulator will need to
    flatten every rank's actions (the actions per rank so far times the ranks, :data:`BYTES_PER_ACTION` each),
    against :func:`budget`; before that, at 4, 8, ..., 512 ranks, the rows alone (:meth:`_early`): a call too
    large stops after seconds, not after minutes of building."""

    def __init__(self, what: str, nranks: int) -> None:
        """Raises:
            ValueError: a bad ``PYHCCL_VERIFY_MEMORY`` (read here, before any plan is built).
        """
        settings.verify_memory()
        self.what, self.n = what, nranks
        self.actions = 0
        self.seen: list[int] = []       # the actions of each rank before the first look
        self.first: tuple[int, int] | None = None        # (ranks built, resident bytes) at the first look

    def built(self, ranks: int, plan) -> None:
        """``ranks`` plans are built, ``plan`` the last (call after each); may raise :class:`MemoryBudgetError`."""
        actions = sum(map(action_count, plan.steps))
        self.actions += actions
        if ranks < BUILD_CHECK_RANKS:
            self.seen.append(actions)
            if ranks >= _EARLY_RANKS and not ranks & (ranks - 1) and ranks < self.n:
                self._early(ranks)
            return
        if ranks % BUILD_CHECK_RANKS or ranks >= self.n:
            return
        rss = resident()
        if self.first is None:          # the first ranks also build what every rank shares: no rate from them
            self.first = (ranks, rss)
            return
        per_rank = max(0, rss - self.first[1]) / (ranks - self.first[0])
        flat = BYTES_PER_ACTION * self.actions * self.n // ranks
        b = budget()
        need = rss + int(per_rank * (self.n - ranks)) + flat
        if b is not None and need > b[0]:
            raise MemoryBudgetError(f"{self.what} (the plans of {ranks} ranks hold {_size(rss)} so far; the "
                                    f"simulator's rows of their actions, about {_size(flat)})", need, *b)

    def _early(self, ranks: int) -> None:
        """A look after ``ranks`` (a power of two) plans, before the first: the simulator's rows of every rank's
        actions, as many a rank as the median of those built (a root's or a leader's more are not taken for every
        rank's), alone against the budget. A plan of 393 216 actions a rank (a Mesh AllReduce over 131 072
        ranks) takes half a second to build: the first look, 1024 ranks in, would come after minutes."""
        typical = sorted(self.seen)[ranks // 2]
        flat = BYTES_PER_ACTION * (self.actions + typical * (self.n - ranks))
        b = budget() if flat >= MIN_CHECK_BYTES else None
        if b is not None and flat > b[0]:
            raise MemoryBudgetError(f"{self.what} (the first {ranks} ranks' plans hold {typical} actions each, the "
                                    f"median; the simulator's rows of every rank's, about {_size(flat)})", flat, *b)


def _size(nbytes: int) -> str:
    return f"{nbytes / _GIB:.1f} GiB" if nbytes >= _GIB else f"{nbytes / 2**20:.0f} MiB"


def _statm(field: int) -> int:
    """A field of /proc/self/statm (0: the address space's size, 1: resident) in bytes; 0 where it is missing."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _cgroup_room() -> int:
    """The bytes this process's memory cgroups may still take (a limit less the usage, less the page cache that
    can be dropped); a large number where none has a limit."""
    room = 2**62
    for limit, d, usage, cache in _cgroup_limits():
        try:
            stat = dict(x.split() for x in (d / "memory.stat").read_text().splitlines() if len(x.split()) == 2)
            room = min(room, limit - int((d / usage).read_text()) + int(stat.get(cache, 0)))
        except (OSError, ValueError):
            continue
    return room


@lru_cache(maxsize=1)
def _cgroup_limits() -> tuple:
    """This process's memory cgroups that have a limit: ``(limit, folder, usage file, page cache field)``
    (v2 and v1; a limit is set when the process starts, and read once)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return ()
    out = []
    for line in lines:                  # v2 "0::/path"; v1 "4:memory:/path"
        if line.count(":") < 2:
            continue
        _, ctrl, rel = line.split(":", 2)
        if ctrl == "":
            d = Path("/sys/fs/cgroup", rel.strip().lstrip("/"))
            files = ("memory.max", "memory.current", "inactive_file")
        elif "memory" in ctrl.split(","):
            d = Path("/sys/fs/cgroup/memory", rel.strip().lstrip("/"))
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        try:
            limit = (d / files[0]).read_text().strip()
        except OSError:
            continue
        if limit.isdigit() and int(limit) < 2**60:
            out.append((int(limit), d, files[1], files[2]))
    return tuple(out)
