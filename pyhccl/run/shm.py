"""Shared-memory runtime: every rank's plan run on one node through an MPI-3 shared window.

The plans are the ones the MPI runtime runs (:mod:`pyhccl.run.mpi`); only the transport
differs. Each rank's data that a peer reads lives in that rank's segment of one window
(``MPI.Win.Allocate_shared`` on ``comm.Split_type(MPI.COMM_TYPE_SHARED)``), every rank sees
every segment as a numpy array, and a receive becomes a load from the peer's segment, the way
UB's memory semantics let an NPU load and reduce a peer's HBM (HCCL's Mesh templates over
``MemSemantic`` links). The window is allocated once per communicator and grown, never per call.

API::

    engine = ShmEngine(comm)                     # collective; ValueError off one node
    plan = compile_shm(call, "MeshTwoShot", np.dtype(np.float32).itemsize, comm.Get_rank())
    plan.run(engine, (inp, out, scratch), np.add)   # as CompiledPlan.run(comm, bufs, ufunc)
    run_shm(comm, call, "MeshTwoShot", inp, out, np.add)   # the same, engine and plan cached

``compile_shm`` builds every rank's plan (``groups``: each rank's level groups, as
``Layout.algo_groups`` gives them, for HCCL's names) and compiles them together, so each
receive is matched to the peer's send region at compile time (in order per pair of ranks
within a step, as the MPI runtime's matching does). ``scratch`` is ignored: scratch lives in
the window. For an in-place call pass ``inp`` = ``out`` (as the Communicator does).
``engine.alloc(nbytes)`` (collective) gives memory
in a window of its own that every plan reads in place: a call whose input or output lies in such
memory uses it as that buffer's window area, whatever the plan, so nothing is copied in or out of
it. With such memory allocated, each rank writes where its input and output are (allocation and
offset) in the header of its segment before the first barrier, and binds its loads from peers to
what their headers say after it, so ranks may mix allocated and ordinary arrays.

Compilation works on atoms (the sim's idea: buffers cut at every boundary any plan uses) and
on the values written into them, then

* fuses a receive into scratch that feeds one local reduce (or copy) of the same step into
  that op: ``ufunc(dst, peer_view, out=dst)``, no intermediate copy;
* folds a copy ``d = s`` whose value only feeds one later reduce into it: ``ufunc(s, x, out=d)``;
* places each written value: in the window only when a peer reads it, else straight in the
  user's buffer; the user's input enters the window only where a peer reads it, and the
  output leaves it only where the final value is there (copied right after it is written).

Steps are separated by a node barrier (with ``Win.Sync``) before each step that loads from a
peer and after it; a step in which a rank overwrites what a peer loads in that step gets one
more between the loads and the local operations. Ops per buffer address are built once and
cached, so the run loop is one call per contiguous piece.
"""

from __future__ import annotations

import bisect
import itertools
from collections import OrderedDict, defaultdict
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from mpi4py import MPI

from ..core.call import Call
from ..plan.api import build_plan
from ..plan.ir import Buf, Kind, Plan, Region

__all__ = ["KEYVAL", "ShmEngine", "ShmPlan", "ShmRunner", "compile_shm", "shm_engine", "run_shm", "split_engine", "SUFFIX", "OPS",
           "adopt_engine", "release_engine"]

_ALIGN = 64                         # bytes: every window area starts on a cache line
_HEADER = 64                        # bytes at the start of a segment: where this call's input and output are
_COPY, _UFUNC, _SYNC, _BLOCK = 0, 1, 2, 3
#: Bytes per piece when a run of same-length ops is executed piece by piece (half an L2).
CHUNK_BYTES = 256 * 1024
_USER, _WIN = "u", "w"
#: The MPI attribute under which a communicator keeps its engine (:func:`shm_engine`).
KEYVAL = MPI.Comm.Create_keyval()
_VIEW_CACHE = 8                     # bound programs (per buffer addresses, and peers' places) kept per plan
#: Window generations, unique over all engines: views a plan bound to a freed window never match a new one.
_GENERATIONS = itertools.count(1)


class ShmEngine:
    """The node communicator and the growing shared window of one communicator.

    Raises:
        ValueError: ranks of ``comm`` on more than one node (the window cannot span nodes).
    """

    def __init__(self, comm: MPI.Intracomm) -> None:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        ok = node.Get_size() == comm.Get_size()
        if not comm.allreduce(ok, op=MPI.LAND):
            node.Free()
            raise ValueError(f"expecting every rank of the communicator on one node for the shared-memory "
                             f"engine, got {comm.Get_size()} ranks over several nodes; use the MPI runtime "
                             f"(pyhccl.run.mpi.compile_plan) or a node communicator "
                             f"(comm.Split_type(MPI.COMM_TYPE_SHARED))")
        self.comm, self.rank, self.size = node, node.Get_rank(), node.Get_size()
        self.win: MPI.Win | None = None
        self.nbytes = 0
        self.generation = 0
        self.users = 1                    # communicators holding it (adopt_engine adds, release_engine drops)
        self.segments: list[np.ndarray] = []
        self.heads: list[np.ndarray] = []   # per rank, its header: (input alloc, offset, output alloc, offset)
        self.heaps: dict[int, _Heap] = {}   # alloc() memory by id (ids never reused: a freed one never matches)
        self._heap_ids = itertools.count(1)

    def reserve(self, nbytes: int) -> None:
        """Make every segment at least ``nbytes`` (collective: every rank asks for the same)."""
        if nbytes <= self.nbytes and self.win is not None:
            return
        nbytes = max(nbytes, 2 * self.nbytes, 1 << 16)
        if self.win is not None:
            self.win.Unlock_all()
            self.win.Free()               # nothing outside points into it: plans bind per generation
        self.win = MPI.Win.Allocate_shared(nbytes, 1, comm=self.comm)
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.segments = []
        for p in range(self.size):
            buf, _ = self.win.Shared_query(p)
            self.segments.append(np.frombuffer(buf, np.uint8, nbytes))
        self.heads = [seg[:32].view(np.int64) for seg in self.segments]
        self.nbytes = nbytes
        self.generation = next(_GENERATIONS)

    def sync(self) -> None:
        """Make every rank's stores to the window visible to all: Win.Sync, node barrier, Win.Sync."""
        self.win.Sync()
        self.comm.Barrier()
        self.win.Sync()

    def alloc(self, nbytes: int) -> np.ndarray:
        """``nbytes`` of memory that every rank's plans load from in place: this rank's part as uint8.

        Collective: every rank asks for the same size (ValueError on every rank otherwise). The
        memory is a shared window of its own, valid until :meth:`release` or :meth:`free`.
        """
        sizes = self.comm.allgather(int(nbytes))
        if len(set(sizes)) != 1 or sizes[0] < 0:
            raise ValueError(f"expecting every rank to allocate the same number of bytes (>= 0) of shared "
                             f"memory, got {sorted(set(sizes))}; allocate collectively with the same "
                             f"shape and dtype on every rank")
        win = MPI.Win.Allocate_shared(max(nbytes, 1), 1, comm=self.comm)
        win.Lock_all(MPI.MODE_NOCHECK)
        segs = [np.frombuffer(win.Shared_query(p)[0], np.uint8, max(nbytes, 1))[:nbytes] for p in range(self.size)]
        heap = _Heap(next(self._heap_ids), win, segs, segs[self.rank])
        self.heaps[heap.id] = heap
        return segs[self.rank]

    def release(self, arr: np.ndarray) -> None:
        """Free the :meth:`alloc` memory ``arr`` lies in (collective; every rank passes its part of the same one)."""
        hid = self.where(arr)[0]
        ids = self.comm.allgather(hid)
        if len(set(ids)) != 1 or not hid:
            raise ValueError("expecting every rank to free the same shared allocation, got "
                             + ("an array outside any shared allocation" if not hid else "different ones")
                             + "; free each array from alloc() once, on every rank together")
        self.heaps.pop(hid).free()

    def where(self, arr: np.ndarray) -> tuple[int, int]:
        """``(allocation id, byte offset)`` of ``arr`` in this rank's :meth:`alloc` memory, ``(0, 0)`` outside it."""
        if self.heaps:
            lo = arr.__array_interface__["data"][0]
            hi = lo + arr.nbytes
            for h in self.heaps.values():
                if h.lo <= lo and hi <= h.hi and (arr.size or lo == h.lo):    # an empty one: at its start
                    return h.id, lo - h.lo
        return 0, 0

    def free(self) -> None:
        """Free the windows, the :meth:`alloc` memory and the node communicator (collective)."""
        if self.win is not None:
            self.win.Unlock_all()
            self.win.Free()
        for h in self.heaps.values():
            h.free()
        self.heaps = {}
        self.win, self.segments, self.heads, self.nbytes = None, [], [], 0
        self.comm.Free()


class _Heap:
    """One :meth:`ShmEngine.alloc`: its window, every rank's segment, this rank's address range."""

    __slots__ = ("id", "win", "segments", "lo", "hi")

    def __init__(self, hid: int, win: MPI.Win, segments: list[np.ndarray], mine: np.ndarray) -> None:
        self.id, self.win, self.segments = hid, win, segments
        self.lo = mine.__array_interface__["data"][0]
        self.hi = self.lo + mine.nbytes

    def free(self) -> None:
        self.win.Unlock_all()
        self.win.Free()


#: Suffix of an algorithm name run by this engine ("MeshTwoShot@shm"): selection's engine ``SHM``.
SUFFIX = "@shm"


#: Ops the Communicator runs on this engine: those whose Call is the same on every rank (a root's
#: own IN_PLACE in Reduce, Gather and Scatter would give the root another plan than its peers compile).
OPS = frozenset({"allreduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "alltoallv",
                 "all_gather_v", "reduce_scatter_v"})


def split_engine(name: str) -> tuple[str, bool]:
    """``("MeshTwoShot", True)`` for ``"MeshTwoShot@shm"`` (any case of the suffix), ``(name, False)`` otherwise."""
    if name[-len(SUFFIX):].lower() == SUFFIX:
        return name[:-len(SUFFIX)], True
    return name, False


class ShmRunner:
    """A compiled :class:`ShmPlan` behind the MPI runtime's interface (``run(comm, bufs, ufunc, timeout)``)."""

    scratch_count = 0

    def __init__(self, plan: ShmPlan, engine: ShmEngine) -> None:
        self.plan, self.engine = plan, engine

    def run(self, comm: MPI.Intracomm, bufs: tuple, ufunc: Callable, timeout: float | None = None) -> None:
        self.plan.run(self.engine, bufs, ufunc)


def adopt_engine(comm: MPI.Intracomm, engine: ShmEngine) -> None:
    """Let ``comm`` use ``engine`` (made on another communicator of the same ranks): one window for many
    communicators that never run at the same time (the benchmark's, one per algorithm)."""
    if comm.Get_attr(KEYVAL) is engine:
        return
    release_engine(comm)
    engine.users += 1
    comm.Set_attr(KEYVAL, engine)


def release_engine(comm: MPI.Intracomm) -> None:
    """Drop ``comm``'s engine, if any; the last communicator using it frees its windows and node communicator
    (collective: before ``comm.Free()``, which frees nothing of the engine)."""
    eng = comm.Get_attr(KEYVAL)
    if eng is None:
        return
    comm.Delete_attr(KEYVAL)
    eng.users -= 1
    if eng.users == 0:
        eng.free()


def shm_engine(comm: MPI.Intracomm) -> ShmEngine:
    """The engine cached on ``comm`` (an MPI attribute), created on first use (collective then)."""
    eng = comm.Get_attr(KEYVAL)
    if eng is None:
        eng = ShmEngine(comm)
        comm.Set_attr(KEYVAL, eng)
    return eng


class _Op:
    """One action at atom level: lanes ``(dst atom, a atom, b atom)`` per aligned atom."""

    __slots__ = ("rank", "kind", "step", "order", "dst", "a", "b", "lanes")

    def __init__(self, rank, kind, step, dst, a, b=None):
        self.rank, self.kind, self.step = rank, kind, step
        self.dst, self.a, self.b = dst, a, b        # (rank, buf, Region)
        self.order = 0
        self.lanes: list[list] = []                 # [dst_atom, a_atom, b_atom, def_in_a, def_in_b, def_out]


class ShmPlan:
    """Every rank's plan for one call, compiled for this rank and one element size."""

    def __init__(self, call: Call, plans: Sequence[Plan], itemsize: int, rank: int) -> None:
        self.call, self.itemsize, self.rank, self.n = call, itemsize, rank, len(plans)
        self.plan = plans[rank]
        self._views: OrderedDict = OrderedDict()
        self._layout(plans)
        ops, nsteps = self._ops(plans)
        self._atomize(ops)
        hazard = self._hazards(ops, nsteps)
        defs = self._dataflow(ops)
        self._fuse(ops, defs, hazard)
        self._fold(ops, defs)
        self._program(ops, defs, nsteps, hazard)

    # -- layout: each rank's areas in its segment ---------------------------------------------
    def _layout(self, plans: Sequence[Plan]) -> None:
        c = self.call
        self.sizes, self.areas = {}, {}
        need = 0
        for r, p in enumerate(plans):
            nin = c.input_count(r)
            shift = c.in_place_offset(r) if c.in_place else 0
            nout = max(c.output_count(r), shift + nin if c.in_place else 0)
            sizes = {Buf.INPUT: 0 if c.in_place else nin, Buf.OUTPUT: nout, Buf.SCRATCH: p.scratch_count()}
            at = _HEADER
            for b, k in sizes.items():
                self.sizes[(r, b)] = k
                self.areas[(r, b)] = at
                at += -(-k * self.itemsize // _ALIGN) * _ALIGN
            need = max(need, at)
        self.nbytes = need

    def _norm(self, rank: int, r: Region) -> Region:
        if self.call.in_place and r.buf is Buf.INPUT:
            return r.moved(Buf.OUTPUT, self.call.in_place_offset(rank))
        return r

    # -- ops: pulls matched to the peer's send, then locals ----------------------------------
    def _ops(self, plans: Sequence[Plan]) -> tuple[list[_Op], int]:
        nsteps = max((len(p.steps) for p in plans), default=0)
        ops: list[_Op] = []
        for t in range(nsteps):
            sends, recvs = defaultdict(list), defaultdict(list)
            for r, p in enumerate(plans):
                if t < len(p.steps):
                    for a in p.steps[t].transfers:
                        if a.kind is Kind.SEND:
                            sends[(r, a.peer)].append(a.src)
                        else:
                            recvs[(a.peer, r)].append(a.dst)
            for (src, dst), regs in recvs.items():
                for rd, rs in zip(regs, sends[(src, dst)]):
                    if rd.size:
                        ops.append(_Op(dst, "pull", t, (dst, self._norm(dst, rd)), (src, self._norm(src, rs))))
            for r, p in enumerate(plans):
                if t < len(p.steps):
                    for a in p.steps[t].local:
                        if a.src.size:
                            d = (r, self._norm(r, a.dst))
                            s = (r, self._norm(r, a.src))
                            ops.append(_Op(r, "reduce", t, d, d, s) if a.kind is Kind.REDUCE
                                       else _Op(r, "copy", t, d, s))
        for i, op in enumerate(ops):
            op.order = i
        return ops, nsteps

    # -- atoms: cut each rank's buffers so that every op's sides align atom for atom ----------
    def _atomize(self, ops: list[_Op]) -> None:
        """Cut points closed under every op: a cut inside one side cuts the others at its stream position."""
        cuts: dict[tuple, set] = defaultdict(set)
        sides: dict[tuple, list] = defaultdict(list)
        queue = []
        for op in ops:
            ss = [s for s in (op.dst, op.a, op.b) if s is not None]
            for r, reg in ss:
                sides[(r, reg.buf)].append((reg, ss))
                for off, k in reg.pieces():
                    for x in (off, off + k):
                        if x not in cuts[(r, reg.buf)]:
                            cuts[(r, reg.buf)].add(x)
                            queue.append(((r, reg.buf), x))
        while queue:
            key, x = queue.pop()
            for reg, ss in sides[key]:
                s = _stream_at(reg, x)
                if s is None:
                    continue
                for r2, reg2 in ss:
                    if reg2 is reg and r2 == key[0]:
                        continue
                    y = _offset_at(reg2, s)
                    k2 = (r2, reg2.buf)
                    if y not in cuts[k2]:
                        cuts[k2].add(y)
                        queue.append((k2, y))
        self.bounds = {key: np.array(sorted(v), np.int64) for key, v in cuts.items()}
        for op in ops:
            ats = [self._atoms(s) if s is not None else None for s in (op.dst, op.a, op.b)]
            op.lanes = [[d, a, None if ats[2] is None else ats[2][j], None, None, None]
                        for j, (d, a) in enumerate(zip(ats[0], ats[1]))]

    def _atoms(self, side) -> list[tuple]:
        r, reg = side
        bnd = self.bounds[(r, reg.buf)]
        out = []
        for off, k in reg.pieces():
            i0, i1 = np.searchsorted(bnd, (off, off + k)).tolist()
            out += [(r, reg.buf, int(bnd[i]), int(bnd[i + 1] - bnd[i])) for i in range(i0, i1)]
        return out

    # -- hazards: a step in which a rank overwrites what a peer loads from it in that step ----
    def _hazards(self, ops: list[_Op], nsteps: int) -> set[int]:
        loaded = defaultdict(set)
        written = defaultdict(set)
        for op in ops:
            if op.kind == "pull":
                loaded[op.step].update(l[1] for l in op.lanes)
            else:
                written[op.step].update(l[0] for l in op.lanes)
        return {t for t in range(nsteps) if loaded[t] & written[t]}

    # -- dataflow: the value (def) each lane reads and writes -------------------------------
    def _dataflow(self, ops: list[_Op]) -> list[dict]:
        c = self.call
        defs: list[dict] = []
        cur: dict[tuple, int] = {}
        self.writes: dict[tuple, list[int]] = defaultdict(list)     # atom -> orders of its writers
        for r in range(self.n):                                       # the user's data: initial defs
            if c.in_place:
                sh = c.in_place_offset(r)
                key, lo, hi = (r, Buf.OUTPUT), sh, sh + c.input_count(r)
            else:
                key, lo, hi = (r, Buf.INPUT), 0, c.input_count(r)
            bnd = self.bounds.get(key)
            if bnd is None:
                continue
            for i in range(len(bnd) - 1):
                if lo <= bnd[i] and bnd[i + 1] <= hi:
                    atom = (r, key[1], int(bnd[i]), int(bnd[i + 1] - bnd[i]))
                    cur[atom] = len(defs)
                    defs.append({"atom": atom, "op": None, "readers": [], "final": False})
        for op in ops:
            for lane in op.lanes:
                for k, at in ((3, lane[1]), (4, lane[2])):
                    if at is not None:
                        d = cur.get(at)
                        lane[k] = d
                        if d is not None:
                            defs[d]["readers"].append((op, lane))
            for lane in op.lanes:
                cur[lane[0]] = lane[5] = len(defs)
                defs.append({"atom": lane[0], "op": op, "readers": [], "final": False})
                self.writes[lane[0]].append(op.order)
        for d in cur.values():
            defs[d]["final"] = True
        return defs

    # -- fusion: a pull that feeds one local op of its step is that op's operand -------------
    def _fuse(self, ops: list[_Op], defs: list[dict], hazard: set[int]) -> None:
        for op in ops:
            if op.kind != "pull" or op.step in hazard:
                continue
            keep = []
            for lane in op.lanes:
                d = defs[lane[5]]
                rd = d["readers"]
                if _kept(d) or len(rd) != 1 or rd[0][0].kind == "pull" or rd[0][0].step != op.step \
                        or rd[0][0].rank != op.rank:
                    keep.append(lane)
                    continue
                user, ul = rd[0]
                k = 3 if ul[3] == lane[5] and ul[1] == lane[0] else 4
                ul[k - 2], ul[k] = lane[1], lane[3]         # read the peer's atom, its def
                if lane[3] is not None:
                    src = defs[lane[3]]["readers"]
                    src[:] = [(user, ul) if x[1] is lane else x for x in src]
                d["readers"] = []
                d["dead"] = True
            op.lanes = keep

    # -- folding: a copy whose value only feeds one reduce becomes that reduce's first operand
    def _fold(self, ops: list[_Op], defs: list[dict]) -> None:
        for op in ops:
            if op.kind != "copy":
                continue
            keep = []
            for lane in op.lanes:
                d = defs[lane[5]]
                rd = d["readers"]
                if _kept(d) or len(rd) != 1:
                    keep.append(lane)
                    continue
                user, ul = rd[0]
                src = lane[1]
                if user.kind != "reduce" or src[0] != op.rank or ul[3] != lane[5] or ul[1] != lane[0] or ul[2] == lane[0] \
                        or any(op.order < w < user.order for w in self.writes.get(src, ())):
                    keep.append(lane)
                    continue
                ul[1], ul[3] = src, lane[3]
                if lane[3] is not None:
                    defs[lane[3]]["readers"].append((user, ul))
                d["readers"] = []
                d["dead"] = True
            op.lanes = keep

    # -- the program: homes of values, then this rank's op list with its syncs ---------------
    def _home(self, defs: list[dict], d: int | None, atom: tuple) -> str:
        if atom[1] is Buf.SCRATCH or atom[0] != self.rank:
            return _WIN
        if d is None:
            return _USER
        info = defs[d]
        return _WIN if any(op.rank != atom[0] for op, _ in info["readers"]) else _USER

    def _program(self, ops: list[_Op], defs: list[dict], nsteps: int, hazard: set[int]) -> None:
        me = self.rank
        pulling = {op.step for op in ops if op.kind == "pull" and op.lanes}
        pulling |= {op.step for op in ops for l in op.lanes
                    if op.kind != "pull" and any(a is not None and a[0] != op.rank for a in l[1:3])}
        prog: list[tuple] = []
        for i, d in enumerate(defs):                         # copy-in: user data a peer loads
            if d["op"] is None and d["atom"][0] == me and self._home(defs, i, d["atom"]) == _WIN:
                at = d["atom"]
                prog.append((_COPY, (_WIN,) + at[1:], (_USER,) + at[1:], None))
        synced = False
        mine = [op for op in ops if op.rank == me]
        by_step = defaultdict(list)
        for op in mine:
            by_step[op.step].append(op)
        for t in range(nsteps):
            if t in pulling and not synced:
                prog.append((_SYNC, None, None, None))
            pulls = [op for op in by_step[t] if op.kind == "pull"]
            local = [op for op in by_step[t] if op.kind != "pull"]
            for group in (pulls, local):
                for op in group:
                    prog += self._lanes(op, defs)
                if group is pulls and t in hazard:
                    prog.append((_SYNC, None, None, None))
            synced = t in pulling
            if synced:
                prog.append((_SYNC, None, None, None))
        self.program = _coalesce(prog)
        self.syncs = sum(1 for p in self.program if p[0] == _SYNC)
        # what runs before the first barrier touches only this rank's memory; after it, peers' too
        self.cut = next((i + 1 for i, p in enumerate(self.program) if p[0] == _SYNC), len(self.program))

    def _lanes(self, op: _Op, defs: list[dict]) -> list[tuple]:
        out = []
        for lane in op.lanes:
            dst = lane[0]
            hd = self._home(defs, lane[5], dst)
            a = (self._home(defs, lane[3], lane[1]),) + lane[1][1:] if lane[1][0] == self.rank \
                else (_WIN,) + lane[1]
            b = None
            if lane[2] is not None:
                b = (self._home(defs, lane[4], lane[2]),) + lane[2][1:] if lane[2][0] == self.rank \
                    else (_WIN,) + lane[2]
            code = _COPY if b is None else _UFUNC
            out.append((code, (hd,) + dst[1:], a, b))
            if defs[lane[5]]["final"] and dst[1] is Buf.OUTPUT and hd == _WIN:      # copy-out, while hot
                out.append((_COPY, (_USER,) + dst[1:], (_WIN,) + dst[1:], None))
        return out

    # -- run ------------------------------------------------------------------------------------
    def _win_arrays(self, engine: ShmEngine, dtype: np.dtype) -> list[dict]:
        arrs = []
        for p in range(self.n):
            seg = engine.segments[p]
            arrs.append({b: seg[self.areas[(p, b)]:self.areas[(p, b)] + self.sizes[(p, b)] * dtype.itemsize]
                         .view(dtype) for b in Buf})
        return arrs

    def run(self, engine: ShmEngine | MPI.Intracomm, bufs: tuple, ufunc: Callable) -> None:
        """Execute with ``(input, output, scratch)`` arrays of one dtype (scratch is not used)."""
        if not isinstance(engine, ShmEngine):
            engine = shm_engine(engine)
        inp, out = bufs[0], bufs[1]
        engine.reserve(self.nbytes)
        key = (inp.__array_interface__["data"][0], inp.size, out.__array_interface__["data"][0], out.size,
               out.dtype.str, engine.generation, id(engine))
        if not engine.heaps:                       # every area where the plan put it: one binding
            prog = self._views.get(key)
            if prog is None:
                prog = self._remember(key, self._bind(engine, inp, out, self.program))
            _execute(prog, engine, ufunc)
            return
        places = self._places(engine, inp, out)
        engine.heads[self.rank][:] = places
        pre = self._views.get((key, None))
        if pre is None:
            pre = self._remember((key, None), self._bind(engine, inp, out, self.program[:self.cut], places))
        _execute(pre, engine, ufunc)
        if self.cut == len(self.program):
            return
        peers = tuple(itertools.chain.from_iterable(h.tolist() for h in engine.heads))   # after the barrier
        post = self._views.get((key, peers))
        if post is None:
            post = self._remember((key, peers), self._bind(engine, inp, out, self.program[self.cut:], peers))
        _execute(post, engine, ufunc)

    def _places(self, engine: ShmEngine, inp: np.ndarray, out: np.ndarray) -> tuple[int, int, int, int]:
        """Where this rank's input and output areas are this call: ``(alloc id, byte offset)`` twice, id 0
        for the plan's own area in the window."""
        me, ip = self.rank, self.call.in_place
        i = (0, self.areas[(me, Buf.INPUT)]) if ip else engine.where(inp)
        o = engine.where(out)
        return (i if i[0] else (0, self.areas[(me, Buf.INPUT)])) + (o if o[0] else (0, self.areas[(me, Buf.OUTPUT)]))

    def _remember(self, key: tuple, prog: list[tuple]) -> list[tuple]:
        self._views[key] = prog
        if len(self._views) > _VIEW_CACHE:
            self._views.popitem(last=False)
        return prog

    def _bind(self, engine: ShmEngine, inp: np.ndarray, out: np.ndarray, program: list[tuple],
              places: Sequence[int] | None = None) -> list[tuple]:
        """``program`` with every location turned into a numpy view (the user's or the window's).

        ``places``: ``(alloc id, offset)`` of input and output for this rank (4 numbers) or for every
        rank (4 per rank); an id other than 0 puts that area in :meth:`ShmEngine.alloc` memory.
        """
        dt = out.dtype
        win = self._win_arrays(engine, dt)
        if places is not None:
            for p in range(self.n) if len(places) > 4 else (self.rank,):
                at = places[4 * p:4 * p + 4] if len(places) > 4 else places
                for j, b in ((0, Buf.INPUT), (2, Buf.OUTPUT)):
                    if at[j]:
                        seg = engine.heaps[at[j]].segments[p]
                        win[p][b] = seg[at[j + 1]:at[j + 1] + self.sizes[(p, b)] * dt.itemsize].view(dt)
        user = {Buf.INPUT: out if self.call.in_place else inp, Buf.OUTPUT: out}
        mine = win[self.rank]
        for b in (Buf.INPUT, Buf.OUTPUT):                   # the user's buffer is the window area
            if user[b].size and user[b].__array_interface__["data"][0] == mine[b].__array_interface__["data"][0]:
                user[b] = mine[b]

        def view(loc):
            if loc is None:
                return None
            if loc[0] == _USER:
                arr = user[loc[1]]
                off, k = loc[2], loc[3]
            else:
                arr = win[loc[1]][loc[2]] if len(loc) == 5 else mine[loc[1]]
                off, k = loc[-2], loc[-1]
            return arr[off:off + k]

        prog = []
        for code, d, a, b in program:
            if code == _SYNC:
                prog.append((code, None, None, None))
                continue
            dv, av, bv = view(d), view(a), view(b)
            if code == _COPY and dv.__array_interface__["data"][0] == av.__array_interface__["data"][0]:
                continue
            prog.append((code, dv, av, bv))
        return _blocked(prog, max(1, CHUNK_BYTES // dt.itemsize))


def _execute(prog: list[tuple], engine: ShmEngine, ufunc: Callable) -> None:
    copyto, sync = np.copyto, engine.sync
    for code, d, a, b in prog:
        if code == _UFUNC:
            ufunc(a, b, out=d)
        elif code == _COPY:
            copyto(d, a)
        elif code == _SYNC:
            sync()
        else:
            for c, dd, aa, bb in d:
                if c == _UFUNC:
                    ufunc(aa, bb, out=dd)
                else:
                    copyto(dd, aa)


def _kept(d: dict) -> bool:
    """A value the call leaves behind: the last one written to an atom of the output (or input);
    scratch is the plan's own, so its last values are not."""
    return d["final"] and d["atom"][1] is not Buf.SCRATCH


def _blocked(prog: list[tuple], chunk: int) -> list[tuple]:
    """Runs of ops of one length whose shared memory is touched at the same positions, run piece by piece.

    A reduce chain into one destination and the copy of its result then stream each piece
    through the cache once instead of once per op.
    """
    out: list[tuple] = []
    run: list[tuple] = []

    def flush():
        if len(run) > 1:
            n = run[0][1].size
            pieces = [(c, d[i:i + chunk], a[i:i + chunk], None if b is None else b[i:i + chunk])
                      for i in range(0, n, chunk) for c, d, a, b in run]
            out.append((_BLOCK, pieces, None, None))
        else:
            out.extend(run)
        run.clear()

    for e in prog:
        if e[0] == _SYNC or e[1].size < 2 * chunk:
            flush()
            out.append(e)
        elif run and (e[1].size != run[0][1].size or not all(_aligned(g, e) for g in run)):
            flush()
            run.append(e)
        else:
            run.append(e)
    flush()
    return out


def _span(v: np.ndarray) -> tuple[int, int]:
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


def _stream_at(reg: Region, x: int) -> int | None:
    """The stream position of offset ``x`` strictly inside ``reg``'s element stream, None if outside."""
    if not reg.count or x < reg.offset or x > reg.end:
        return None
    q, within = divmod(x - reg.offset, reg.stride or reg.count)
    if q >= reg.repeat:
        q, within = reg.repeat - 1, x - reg.offset - (reg.repeat - 1) * (reg.stride or reg.count)
    if within > reg.count:
        return None
    s = q * reg.count + within
    return s if 0 < s < reg.size else None


def _offset_at(reg: Region, s: int) -> int:
    """The offset of stream position ``s`` (0 < s < size) in ``reg``."""
    q, within = divmod(s, reg.count)
    return reg.offset + q * (reg.stride or 0) + within


def _coalesce(prog: list[tuple]) -> list[tuple]:
    """Merge consecutive entries whose every location continues the previous one."""
    out: list[list] = []
    for code, d, a, b in prog:
        if out and code != _SYNC and out[-1][0] == code and _next(out[-1][1], d) and _next(out[-1][2], a) \
                and (b is None and out[-1][3] is None or b is not None and _next(out[-1][3], b)):
            prev = out[-1]
            merged = [_grow(prev[1], d), _grow(prev[2], a), None if b is None else _grow(prev[3], b)]
            if all(_apart(merged[0], x) for x in merged[1:]):
                prev[1:] = merged
                continue
        out.append([code, d, a, b])
    return [tuple(x) for x in out]


def _next(x, y) -> bool:
    return x is not None and y is not None and x[:-2] == y[:-2] and x[-2] + x[-1] == y[-2]


def _apart(d, x) -> bool:
    """Locations ``d`` (written) and ``x`` (read) are disjoint, the same, or in different arrays."""
    if x is None or _array(d) != _array(x) or d[-2:] == x[-2:]:
        return True
    return d[-2] + d[-1] <= x[-2] or x[-2] + x[-1] <= d[-2]


def _array(loc) -> tuple:
    """The array a location is in; the user's and this rank's window area count as one."""
    return loc[1:-2] if len(loc) == 5 else (loc[1],)


def _grow(x, y):
    return x[:-1] + (x[-1] + y[-1],)


def compile_shm(call: Call, algo: str, itemsize: int, rank: int, groups: Sequence | None = None, *,
                uniform: bool = True) -> ShmPlan:
    """Build every rank's plan for ``call`` and compile them for ``rank`` (default: this process's).

    Args:
        groups: per rank, its level groups for an HCCL name (``[layout.algo_groups(r, nlevels)
            for r in range(n)]``); None for pyhccl's templates (one level of all ranks).
        rank: the rank of the caller in the communicator the plan will run on.
    """
    g = tuple(tuple(tuple(x) for x in gr) for gr in groups) if groups is not None else None
    return _compile(call, algo, itemsize, g, uniform, rank)


@lru_cache(maxsize=64)
def _compile(call: Call, algo: str, itemsize: int, groups, uniform: bool, rank: int) -> ShmPlan:
    plans = [build_plan(call, algo, r, None if groups is None else groups[r], uniform=uniform)
             for r in range(call.nranks)]
    return ShmPlan(call, plans, itemsize, rank)


def run_shm(comm: MPI.Intracomm, call: Call, algo: str, inp: np.ndarray, out: np.ndarray, ufunc: Callable,
            groups: Sequence | None = None, *, uniform: bool = True) -> None:
    """Run ``call`` with ``algo`` over ``comm``'s shared window (engine and plan cached)."""
    eng = shm_engine(comm)
    compile_shm(call, algo, out.dtype.itemsize, comm.Get_rank(), groups, uniform=uniform) \
        .run(eng, (inp, out, None), ufunc)
