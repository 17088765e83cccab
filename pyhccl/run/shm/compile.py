"""The shared-memory engine's compiler: every rank's plan for one call, compiled for this rank.

The plans are the ones the MPI runtime runs (:mod:`pyhccl.run.mpi`), one per rank, built by the
caller (:func:`pyhccl.plan.build_plan`); compiling them together matches each receive to the
peer's send region (in order per pair of ranks within a step, as the MPI runtime's matching
does), so a receive becomes a load from the peer's window area.

Compilation works on atoms (the simulator's idea: buffers cut at every boundary any plan uses)
and on the values written into them, then

* fuses a receive into scratch that feeds one local reduce (or copy) of the same step into
  that op: ``ufunc(dst, peer_view, out=dst)``, no intermediate copy;
* lets a local read of a rank's own copy ``d = s`` read ``s`` (the copy goes when nothing else reads
  it), so a copy that only feeds a reduce folds into it: ``ufunc(s, x, out=d)``;
* with cross-memory attach, lets a load of a peer's copy of its own data read the original
  instead (the copy goes when nothing else reads it);
  and a value computed in scratch only to be copied into the output is computed there;
* places the values and lists this rank's program (:mod:`.program`).
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from typing import Sequence

import numpy as np

from ...core.call import Call
from ...plan.ir import Buf, Kind, Plan, Region
from .engine import HEADER
from .program import SYNC, build_program

__all__ = ["OPS", "ShmPlan", "compile_shm"]

#: Ops the shared-memory engine runs: those whose Call is the same on every rank, and Reduce
#: compiled out of place on every rank (a root's own IN_PLACE runs on a copy of its input,
#: :class:`~.execute.ShmRunner`); Gather and Scatter would give the root another plan.
OPS = frozenset({"allreduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "alltoallv",
                 "all_gather_v", "reduce_scatter_v", "reduce"})
_ALIGN = 64                         # bytes: every window area starts on a cache line
#: With cross-memory attach, a plain load of this many bytes or more from a rank with less work in
#: the step is shared with that rank, which pushes a part (:func:`.program.shares`).
SHARE_MIN_BYTES = 256 * 1024


class _Op:
    """One action at atom level: lanes ``(dst atom, a atom, b atom)`` per aligned atom."""

    __slots__ = ("rank", "kind", "step", "order", "dst", "a", "b", "lanes")

    def __init__(self, rank, kind, step, dst, a, b=None):
        self.rank, self.kind, self.step = rank, kind, step
        self.dst, self.a, self.b = dst, a, b        # (rank, buf, Region)
        self.order = 0
        self.lanes: list[list] = []                 # [dst_atom, a_atom, b_atom, def_in_a, def_in_b, def_out]


class ShmPlan:
    """Every rank's plan for one call, compiled for this rank and one element size; ``cma``: peers read
    each other's input and output in place (:mod:`.cma`), the window holds only scratch.

    Attributes:
        plan: this rank's plan; ``nbytes``: the window segment it needs; ``areas`` and ``sizes``:
        per ``(rank, buffer)`` the byte offset of its area in the rank's segment and its elements;
        ``program``: this rank's program (:mod:`.program`); ``syncs``: its node barriers; ``cut``:
        the entries up to the first barrier (they touch only this rank's memory).
    """

    def __init__(self, call: Call, plans: Sequence[Plan], itemsize: int, rank: int, cma: bool = False) -> None:
        self.call, self.itemsize, self.rank, self.n, self.cma = call, itemsize, rank, len(plans), cma
        self.plan = plans[rank]
        self._layout(plans)
        ops, nsteps = self._ops(plans)
        self._atomize(ops)
        defs = self._dataflow(ops)
        if cma:
            self._forward(ops, defs)
        self._propagate(ops, defs)
        hazard = self._hazards(ops, nsteps)             # on the atoms the pulls read once forwarded
        self._fuse(ops, defs, hazard)
        if cma:
            self._sink(ops, defs)
        self.program = build_program(rank, ops, defs, nsteps, hazard, cma, max(1, SHARE_MIN_BYTES // itemsize))
        self.syncs = sum(1 for p in self.program if p[0] == SYNC)
        # what runs before the first barrier touches only this rank's memory; after it, peers' too
        self.cut = next((i + 1 for i, p in enumerate(self.program) if p[0] == SYNC), len(self.program))
        self.nsteps = nsteps

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
            at = HEADER
            for b, k in sizes.items():
                self.sizes[(r, b)] = k
                self.areas[(r, b)] = at
                if not self.cma or b is Buf.SCRATCH:       # with cma input and output stay in the user's buffers
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
        for d in cur.values():              # a non-root Reduce's output is the templates' work space: nothing is left there
            at = defs[d]["atom"]
            defs[d]["final"] = not (c.op == "reduce" and at[1] is Buf.OUTPUT and at[0] != c.root)
        return defs

    # -- forwarding (cma): a pull of a value the peer copied from its own data loads the original
    def _forward(self, ops: list[_Op], defs: list[dict]) -> None:
        """A pull lane whose value is a peer's plain copy ``d = s`` reads ``s`` when the peer writes ``s``'s
        atom no more from the copy up to the pull's step (inclusive); a copy nothing reads then goes."""
        last_step = {op.order: op.step for op in ops}
        for op in ops:
            if op.kind != "pull":
                continue
            for lane in op.lanes:
                d = lane[3]
                src = defs[d]["op"] if d is not None else None
                if src is None or src.kind != "copy" or src.rank != lane[1][0]:
                    continue
                cl = next(l for l in src.lanes if l[5] == d)
                if any(w > src.order and last_step[w] <= op.step for w in self.writes.get(cl[1], ())):
                    continue
                _reread(defs, op, lane, 3, src, cl)

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

    # -- propagation: a local read of this rank's plain copy ``d = s`` reads ``s`` ------------
    def _propagate(self, ops: list[_Op], defs: list[dict]) -> None:
        """A local op's operand whose value is its rank's own copy ``d = s`` reads ``s`` instead when nothing writes
        ``s``'s atom between the copy and the op; a copy nothing reads then goes. Chains resolve in op order (a
        copy of a copy reads the original), and a copy that only feeds a reduce folds into it: ``ufunc(s, x,
        out=d)``. (MeshTwoShot keeps a rank's own slice in scratch while it loads the lower ranks' into its
        output: both copies go and the reduce reads the input.)"""
        for op in ops:
            if op.kind == "pull":
                continue
            for lane in op.lanes:
                for k in (3, 4):
                    d = lane[k]
                    src = defs[d]["op"] if d is not None else None
                    if src is None or src.kind != "copy" or src.rank != op.rank:
                        continue
                    cl = next(l for l in src.lanes if l[5] == d)
                    if cl[1][0] != op.rank or any(src.order < w < op.order for w in self.writes.get(cl[1], ())):
                        continue
                    _reread(defs, op, lane, k, src, cl)

    # -- sinking (cma): a value written to scratch only for one later copy into the output is written there
    def _sink(self, ops: list[_Op], defs: list[dict]) -> None:
        """A copy ``o = d`` of this rank whose source value ``d`` (in scratch) has no other reader goes, and
        ``d``'s writer writes ``o`` instead, when nothing writes ``o`` in between and every read of ``o``'s
        previous value comes in an earlier step than the writer (a peer's load of it cannot meet the write)."""
        by_atom = defaultdict(list)
        for i, d in enumerate(defs):
            by_atom[d["atom"]].append(i)
        for op in ops:
            if op.kind != "copy" or op.rank != self.rank:
                continue
            keep = []
            for cl in op.lanes:
                d = cl[3]
                info = defs[d] if d is not None else None
                w = info and info["op"]
                o = cl[0]
                if w is None or w.kind == "pull" or info["atom"][1] is not Buf.SCRATCH or len(info["readers"]) != 1 \
                        or o[1] is Buf.SCRATCH or any(w.order < x < op.order for x in self.writes.get(o, ())):
                    keep.append(cl)
                    continue
                mine = by_atom[o]
                prev = [j for j in mine[:mine.index(cl[5])] if defs[j]["op"] is None or defs[j]["op"].order < w.order]
                if prev and any(rop.step >= w.step for rop, _ in defs[prev[-1]]["readers"]):
                    keep.append(cl)
                    continue
                wl = next(l for l in w.lanes if l[5] == d)
                wl[0], wl[5] = o, cl[5]
                defs[cl[5]]["op"] = w
                info["readers"], info["dead"] = [], True
                self.writes[o].append(w.order)
            op.lanes = keep


def _reread(defs: list[dict], op: _Op, lane: list, k: int, copy: _Op, cl: list) -> None:
    """``lane`` of ``op`` reads operand ``k`` (3: a, 4: b) from the source of ``copy``'s lane ``cl`` instead of its
    result; the copy's lane goes when nothing else reads its result and the call does not leave it behind."""
    d = lane[k]
    rd = defs[d]["readers"]
    rd[:] = [x for x in rd if x[1] is not lane]
    lane[k - 2], lane[k] = cl[1], cl[3]
    if cl[3] is not None:
        defs[cl[3]]["readers"].append((op, lane))
    if not rd and not _kept(defs[d]):
        copy.lanes = [l for l in copy.lanes if l is not cl]
        if cl[3] is not None:
            srd = defs[cl[3]]["readers"]
            srd[:] = [x for x in srd if x[1] is not cl]
        defs[d]["dead"] = True


def _kept(d: dict) -> bool:
    """A value the call leaves behind: the last one written to an atom of the output (or input);
    scratch is the plan's own, so its last values are not."""
    return d["final"] and d["atom"][1] is not Buf.SCRATCH


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


def compile_shm(call: Call, plans: Sequence[Plan], itemsize: int, rank: int, cma: bool = False) -> ShmPlan:
    """Compile every rank's plan for ``call`` (``plans[r]``: rank r's, from :func:`pyhccl.plan.build_plan`)
    for ``rank`` and elements of ``itemsize`` bytes; ``cma``: for an engine whose ranks read each other's
    buffers in place (:attr:`~.engine.ShmEngine.cma`). Cached: the same plans compile once.

    Raises:
        ValueError: not one plan per rank of ``call``, in rank order.
    """
    plans = tuple(plans)
    if len(plans) != call.nranks or any(p.rank != r for r, p in enumerate(plans)):
        raise ValueError(f"expecting every rank's plan, rank by rank ({call.nranks}), for the shared-memory engine, "
                         f"got the plans of ranks {[p.rank for p in plans]}; build them with "
                         f"[pyhccl.plan.build_plan(call, algo, r) for r in range(call.nranks)]")
    return _compile(call, plans, itemsize, rank, bool(cma))


@lru_cache(maxsize=64)
def _compile(call: Call, plans: tuple[Plan, ...], itemsize: int, rank: int, cma: bool) -> ShmPlan:
    return ShmPlan(call, plans, itemsize, rank, cma)
