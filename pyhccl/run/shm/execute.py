"""Running a compiled :class:`~.compile.ShmPlan`: its program bound to numpy views, executed between node barriers.

:class:`ShmRunner` is the engine's :class:`~pyhccl.run.base.Runner`. Per buffer address (and,
with :meth:`~.engine.ShmEngine.alloc` memory, per peers' places) the program is bound once to
views of the user's arrays and the window and cached, so a call is one numpy call per
contiguous piece. With :meth:`~.engine.ShmEngine.alloc` memory allocated, each rank writes
where its input and output are (allocation and offset) in the header of its segment before
the first barrier, and binds its loads from peers to what their headers say after it, so ranks
may mix allocated and ordinary arrays. On an engine with cross-memory attach (:mod:`.cma`) the
headers also carry the addresses of the input and output, re-read after the first barrier of
every call (a peer's buffer freed and another allocated at its address is read afresh), and a
load from a peer's ordinary array is a ``process_vm_readv``: straight into the destination
for a copy, else piece by piece into a cache-sized bounce buffer the reduce reads. With a
timeout every node barrier is waited against a deadline and a rank that does not arrive raises
:class:`~pyhccl.run.timeout.CollectiveTimeoutError`.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from ...algo.names import AlgoRef, Runtime
from ...plan.ir import Buf
from ..timeout import CollectiveTimeoutError
from .cma import Remote, reader, writer
from .compile import ShmPlan
from .engine import ShmEngine
from .program import BLOCK, COPY, PEER, SYNC, UFUNC, USER

__all__ = ["ShmRunner", "CHUNK_BYTES"]

#: Bytes per piece when a run of same-length ops is executed piece by piece, and per read from a peer
#: with cross-memory attach into the bounce buffer a reduce reads (half a core's L2, 1.25 MiB here: a
#: 2-rank AllReduce of 4-64 MiB read by 1 MiB pieces ran 1-11 % slower, 8 ranks 0-16 %, alternated runs).
CHUNK_BYTES = 256 * 1024
_HEAD = 6                           # int64 per rank in the header: (alloc id, offset) x 2, input and output addresses
LOAD = 4                            # a prepared read from a peer's memory (program entry (LOAD, read, None, None))
_VIEW_CACHE = 8                     # bound programs (per buffer addresses, and peers' places) kept per runner
_WHERE = {"before": "before step {t}", "within": "between the loads and the local ops of step {t}",
          "after": "after step {t}"}


class ShmRunner:
    """A compiled :class:`ShmPlan` on an engine: the :class:`~pyhccl.run.base.Runner` of the shared-memory engine.

    ``scratch`` is ignored (scratch lives in the window); for an in-place call pass ``inp`` =
    ``out``; an input that overlaps the output of a call compiled out of place (a Reduce root's
    IN_PLACE, whose peers compile the plan out of place) is first copied into the runner's own
    array. ``comm`` is not used: the engine holds the node communicator.
    """

    scratch_count = 0

    def __init__(self, plan: ShmPlan, engine: ShmEngine) -> None:
        if plan.cma and not engine.cma:
            raise ValueError("expecting a plan compiled for this engine, got one compiled with cma=True for an engine "
                             "without cross-memory attach; compile with compile_shm(..., cma=engine.cma)")
        self.plan, self.engine = plan, engine
        self._views: OrderedDict = OrderedDict()
        self._bounce = engine.bounce(CHUNK_BYTES) if plan.cma else None
        self._own: np.ndarray | None = None

    def run(self, comm: Any, bufs: tuple, ufunc: Callable | None, timeout: float | None = None) -> None:
        """Execute with ``(input, output, scratch)`` numpy arrays of one dtype.

        Raises:
            CollectiveTimeoutError: with ``timeout`` (seconds), a node barrier some rank did not reach in time.
        """
        p, engine = self.plan, self.engine
        inp, out = bufs[0], bufs[1]
        if not p.call.in_place and inp.size and np.may_share_memory(inp, out):
            inp = self._own_copy(inp)       # a Reduce root's IN_PLACE: the plan, out of place, reads a copy
        if not engine.reserve(p.nbytes, timeout):
            raise self._stalled(None, timeout)
        key, places, pre = self._pre(inp, out)
        if places is not None:
            engine.heads[p.rank][:] = places
        self._execute(pre, ufunc, timeout)
        if places is not None and p.cut < len(p.program):
            self._execute(self._post(key, inp, out, self._peers()), ufunc, timeout)

    def bind(self, inp: np.ndarray, out: np.ndarray, ufunc: Callable | None) -> Callable[[], None]:
        """:meth:`run` on these arrays with no timeout, as a function of no arguments (the warm path's call: a
        loop calling with the same arrays): the binding looked up once, again only when the window grows, shared
        arrays come or go, or a peer's places change (read after the first barrier of every call, as :meth:`run`
        does)."""
        p, engine, execute = self.plan, self.engine, self._execute
        if not p.call.in_place and inp.size and np.may_share_memory(inp, out):
            return lambda: self.run(None, (inp, out, None), ufunc)
        gen = -1
        key = mine = pre = head = heads = seen = post = None
        rest = p.cut < len(p.program)
        join = b"".join

        def go() -> None:
            nonlocal gen, key, mine, pre, head, heads, seen, post
            if engine.generation != gen or (mine is None) != (not engine.heaps and not p.cma):
                # first call, the window grown since, or shared arrays allocated (every rank then writes its header,
                # peers read it) or all released since: the full path, then bind
                self.run(None, (inp, out, None), ufunc)
                gen = engine.generation
                key, places, pre = self._pre(inp, out)
                mine = None if places is None else np.array(places, np.int64)
                head, heads, seen = engine.heads[p.rank], engine.heads, None
                return
            if mine is None:
                execute(pre, ufunc, None)
                return
            head[:] = mine
            execute(pre, ufunc, None)
            if rest:
                now = join([h.tobytes() for h in heads])        # every rank's header: bind again when one moved
                if now != seen:
                    seen, post = now, self._post(key, inp, out, self._peers())
                execute(post, ufunc, None)
        return go

    def _pre(self, inp: np.ndarray, out: np.ndarray) -> tuple[tuple, tuple | None, list[tuple]]:
        """The binding of the program before its first barrier for these arrays: ``(key, places, program)``; places
        (this rank's header) None where the plan needs none (no peer's places read: the whole program)."""
        p, engine = self.plan, self.engine
        key = (inp.__array_interface__["data"][0], inp.size, out.__array_interface__["data"][0], out.size,
               out.dtype.str, engine.generation, id(engine))
        if not engine.heaps and not p.cma:         # every area where the plan put it: one binding
            prog = self._views.get(key)
            if prog is None:
                prog = self._remember(key, self._bind(inp, out, p.program))
            return key, None, prog
        places = self._places(inp, out) + (inp.__array_interface__["data"][0], out.__array_interface__["data"][0])
        pre = self._views.get((key, None))
        if pre is None:
            pre = self._remember((key, None), self._bind(inp, out, p.program[:p.cut], places))
        return key, places, pre

    def _peers(self) -> tuple[int, ...]:
        """Every rank's header (after the first barrier: where each peer's input and output are this call)."""
        return tuple(itertools.chain.from_iterable(h.tolist() for h in self.engine.heads))

    def _post(self, key: tuple, inp: np.ndarray, out: np.ndarray, peers: tuple) -> list[tuple]:
        """The program from the first barrier on, bound to these arrays and the peers' places."""
        post = self._views.get((key, peers))
        if post is None:
            post = self._remember((key, peers), self._bind(inp, out, self.plan.program[self.plan.cut:], peers))
        return post

    def _own_copy(self, inp: np.ndarray) -> np.ndarray:
        """``inp`` copied into this runner's own array (kept: the next call binds to the same address)."""
        own = self._own
        if own is None or own.size != inp.size or own.dtype != inp.dtype:
            own = self._own = np.empty(inp.size, inp.dtype)
        np.copyto(own, inp.reshape(-1))
        return own

    def run_device(self, comm: Any, bufs: tuple, dev: Any, ufunc: Callable | None,
                   timeout: float | None = None) -> None:
        """The engine reads host memory only: device arrays go through host copies (``dev.run_on_host``)."""
        dev.run_on_host(self, comm, bufs, ufunc, timeout)

    def _execute(self, prog: list[tuple], ufunc: Callable | None, timeout: float | None) -> None:
        copyto, sync = np.copyto, self.engine.sync
        for code, d, a, b in prog:
            if code == UFUNC:
                ufunc(a, b, out=d)
            elif code == COPY:
                copyto(d, a)
            elif code == LOAD:
                d()
            elif code == SYNC:
                if timeout is None:
                    sync()
                elif not sync(timeout):
                    raise self._stalled(d, timeout)
            else:
                for c, dd, aa, bb in d:
                    if c == UFUNC:
                        ufunc(aa, bb, out=dd)
                    elif c == COPY:
                        copyto(dd, aa)
                    else:
                        dd()

    def _stalled(self, where: tuple[int, str] | None, timeout: float) -> CollectiveTimeoutError:
        """The error for the node barrier at ``where`` (``(step, "before" | "within" | "after")``; None:
        the one before the window grows)."""
        p = self.plan
        info = p.plan.info
        algo = str(AlgoRef(info("algo", "?"), Runtime.SHM))
        step, at = (0, "before the shared window grows, before step 0") if where is None \
            else (where[0], _WHERE[where[1]].format(t=where[0]))
        pending = f"the node barrier {at}: some rank of the node has not reached it"
        return CollectiveTimeoutError(
            f"rank {self.engine.rank} waited {timeout:g} s (PYHCCL_TIMEOUT) in the node barrier {at} (of steps "
            f"0..{p.nsteps - 1}) of {info('op', '?')} algorithm {algo} (count {info('count', '?')}, "
            f"{p.itemsize}-byte elements); still pending: {pending}", algorithm=algo, step=step, pending=[pending])

    def _win_arrays(self, dtype: np.dtype) -> list[dict]:
        p, arrs = self.plan, []
        for r in range(p.n):
            seg = self.engine.segments[r]
            arrs.append({b: seg[p.areas[(r, b)]:p.areas[(r, b)] + p.sizes[(r, b)] * dtype.itemsize]
                         .view(dtype) for b in Buf})
        return arrs

    def _places(self, inp: np.ndarray, out: np.ndarray) -> tuple[int, int, int, int]:
        """Where this rank's input and output areas are this call: ``(alloc id, byte offset)`` twice, id 0
        for the plan's own area in the window."""
        p, engine = self.plan, self.engine
        me, ip = p.rank, p.call.in_place
        i = (0, p.areas[(me, Buf.INPUT)]) if ip else engine.where(inp)
        o = engine.where(out)
        return (i if i[0] else (0, p.areas[(me, Buf.INPUT)])) + (o if o[0] else (0, p.areas[(me, Buf.OUTPUT)]))

    def _remember(self, key: tuple, prog: list[tuple]) -> list[tuple]:
        self._views[key] = prog
        if len(self._views) > _VIEW_CACHE:
            self._views.popitem(last=False)
        return prog

    def _bind(self, inp: np.ndarray, out: np.ndarray, program: list[tuple],
              places: Sequence[int] | None = None) -> list[tuple]:
        """``program`` with every location turned into a numpy view (the user's or the window's).

        ``places``: ``(alloc id, offset)`` of input and output and their addresses for this rank (6 numbers)
        or for every rank (6 per rank); an id other than 0 puts that area in :meth:`ShmEngine.alloc` memory,
        else a peer's buffer (PEER) is read at its address with cross-memory attach.
        """
        p, engine = self.plan, self.engine
        dt = out.dtype
        win = self._win_arrays(dt)
        if places is not None:
            for r in range(p.n) if len(places) > _HEAD else (p.rank,):
                at = places[_HEAD * r:_HEAD * r + _HEAD] if len(places) > _HEAD else places
                for j, b in ((0, Buf.INPUT), (2, Buf.OUTPUT)):
                    if at[j]:
                        seg = engine.heaps[at[j]].segments[r]
                        win[r][b] = seg[at[j + 1]:at[j + 1] + p.sizes[(r, b)] * dt.itemsize].view(dt)
        user = {Buf.INPUT: out if p.call.in_place else inp, Buf.OUTPUT: out}
        mine = win[p.rank]
        for b in (Buf.INPUT, Buf.OUTPUT):                   # the user's buffer is the window area
            if user[b].size and user[b].__array_interface__["data"][0] == mine[b].__array_interface__["data"][0]:
                user[b] = mine[b]

        def view(loc):
            if loc is None:
                return None
            if loc[0] == USER:
                arr = user[loc[1]]
                off, k = loc[2], loc[3]
            elif loc[0] == PEER:
                r, b, off, k = loc[1:]
                j = 0 if b is Buf.INPUT else 2
                at = places[_HEAD * r:_HEAD * r + _HEAD]
                if at[j]:                                   # the peer's array is alloc() memory: load in place
                    return win[r][b][off:off + k]
                return Remote(engine.pids[r], at[4 + j // 2] + off * dt.itemsize, k, dt.itemsize)
            else:
                arr = win[loc[1]][loc[2]] if len(loc) == 5 else mine[loc[1]]
                off, k = loc[-2], loc[-1]
            return arr[off:off + k]

        prog = []
        for code, d, a, b in program:
            if code == SYNC:
                prog.append((code, d, None, None))
                continue
            dv, av, bv = view(d), view(a), view(b)
            if code == COPY and not isinstance(av, Remote) and not isinstance(dv, Remote) \
                    and dv.__array_interface__["data"][0] == av.__array_interface__["data"][0]:
                continue
            prog.append((code, dv, av, bv))
        chunk = max(1, CHUNK_BYTES // dt.itemsize)
        prog = _blocked(prog, chunk)
        if not p.cma:
            return prog
        bounce = [x[:chunk * dt.itemsize].view(dt) for x in self._bounce]
        return [(BLOCK, [y for x in e[1] for y in _loads(x, bounce, chunk)], None, None) if e[0] == BLOCK
                else e for x in prog for e in ([x] if x[0] in (SYNC, BLOCK) else _loads(x, bounce, chunk))]


def _loads(e: tuple, bounce: list[np.ndarray], chunk: int) -> list[tuple]:
    """Entry ``e`` with its reads from peers' memory (:class:`~.cma.Remote` operands) as LOAD entries: a
    copy reads straight into its destination (a push, into a peer's memory, writes straight from its
    source); a reduce, piece by piece, reads into ``bounce`` and reduces from there while it is in cache."""
    code, d, a, b = e
    if isinstance(d, Remote):
        return [(LOAD, writer(a, d), None, None)]
    if not isinstance(a, Remote) and not isinstance(b, Remote):
        return [e]
    if code == COPY:
        return [(LOAD, reader(a, d), None, None)]
    out = []
    for i in range(0, d.size, chunk):
        k = min(chunk, d.size - i)
        ops = []
        for j, x in enumerate((a, b)):
            if isinstance(x, Remote):
                out.append((LOAD, reader(x[i:i + k], bounce[j][:k]), None, None))
                ops.append(bounce[j][:k])
            else:
                ops.append(x[i:i + k])
        out.append((UFUNC, d[i:i + k], ops[0], ops[1]))
    return out


def _blocked(prog: list[tuple], chunk: int) -> list[tuple]:
    """Runs of ops of one length whose shared memory is touched at the same positions, run piece by piece.

    A reduce chain into one destination and the copy of its result then stream each piece
    through the cache once instead of once per op. A copy from or into a peer's memory stays whole.
    """
    out: list[tuple] = []
    run: list[tuple] = []

    def flush():
        if len(run) > 1:
            n = run[0][1].size
            pieces = [(c, d[i:i + chunk], a[i:i + chunk], None if b is None else b[i:i + chunk])
                      for i in range(0, n, chunk) for c, d, a, b in run]
            out.append((BLOCK, pieces, None, None))
        else:
            out.extend(run)
        run.clear()

    for e in prog:
        if e[0] == SYNC or e[1].size < 2 * chunk or e[0] == COPY and Remote in (type(e[1]), type(e[2])):
            flush()
            out.append(e)
        elif run and (e[1].size != run[0][1].size or not all(_aligned(g, e) for g in run)):
            flush()
            run.append(e)
        else:
            run.append(e)
    flush()
    return out


def _span(v: np.ndarray | Remote) -> tuple[int, int]:
    if isinstance(v, Remote):                 # another process's memory: apart from every local array
        return 0, 0
    lo = v.__array_interface__["data"][0]
    return lo, lo + v.nbytes


def _aligned(g: tuple, e: tuple) -> bool:
    """Every write of one op meets the other's locations at the same address or not at all."""
    for w, others in ((g[1], e[1:]), (e[1], g[1:])):
        a0, a1 = _span(w)
        for x in others:
            if x is None:
                continue
            b0, b1 = _span(x)
            if b0 != a0 and a0 < b1 and b0 < a1:
                return False
    return True

