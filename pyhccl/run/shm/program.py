"""This rank's program for the shared-memory engine: where each value lives, and the op list with its barriers.

The compiler (:mod:`.compile`) hands over every rank's ops at atom level with their values
(defs); this module places each written value — in the window only when a peer reads it, else
straight in the user's buffer; the user's input enters the window only where a peer reads it,
and the output leaves it only where the final value is there (copied right after it is
written) — then lists this rank's ops with a node barrier before each step that loads from a
peer and after it, and one more between the loads and the local ops of a step in which a rank
overwrites what a peer loads in that step. Consecutive ops on continuing locations merge.

A program entry is ``(code, dst, a, b)``: :data:`COPY` ``dst = a``, :data:`UFUNC`
``dst = ufunc(a, b)``, :data:`SYNC` a node barrier (``dst`` then says where: ``(step,
"before" | "within" | "after")``). A location is ``(USER, buf, offset, count)`` in this
rank's own buffer, ``(WIN, buf, offset, count)`` in its window area, ``(WIN, rank, buf,
offset, count)`` in a peer's, or ``(PEER, rank, buf, offset, count)`` in a peer's own buffer.

With ``cma`` (the peers' buffers readable in place, :mod:`.cma`) every value of the input and
output lives in the user's buffer: no copy-in, no copy-out; a load from a peer's input or output
reads the peer's buffer (PEER) and the window holds the scratch only. The barriers stay where
they are: the hazards are worked out per atom, wherever it lives.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...plan.ir import Buf

__all__ = ["COPY", "UFUNC", "SYNC", "BLOCK", "USER", "WIN", "PEER", "build_program"]

COPY, UFUNC, SYNC, BLOCK = 0, 1, 2, 3
USER, WIN, PEER = "u", "w", "p"


def build_program(rank: int, ops: list[Any], defs: list[dict], nsteps: int, hazard: set[int],
                  cma: bool = False, share_min: int = 0) -> list[tuple]:
    """This rank's program from every rank's ops (``_Op`` of :mod:`.compile`) and their values (defs);
    ``cma``: peers read this rank's input and output in place; ``share_min``: with ``cma``, the fewest
    elements of a load that the source rank may take a part of, pushing it (:func:`shares`; 0: never)."""
    me = rank
    share = shares(ops, nsteps, share_min) if cma and share_min else {}
    pushes = defaultdict(list)                           # step -> this rank's pushes into peers
    if cma:                                              # every value of input and output at home
        defs = [dict(d, cma=True) for d in defs]
    pulling = {op.step for op in ops if op.kind == "pull" and op.lanes}
    pulling |= {op.step for op in ops for l in op.lanes
                if op.kind != "pull" and any(a is not None and a[0] != op.rank for a in l[1:3])}
    prog: list[tuple] = []
    for i, d in enumerate(defs):                         # copy-in: user data a peer loads
        if d["op"] is None and d["atom"][0] == me and _home(me, defs, i, d["atom"]) == WIN:
            at = d["atom"]
            prog.append((COPY, (WIN,) + at[1:], (USER,) + at[1:], None))
    synced = False
    by_step = defaultdict(list)
    for op in ops:
        if op.rank == me:
            by_step[op.step].append(op)
        for lane in op.lanes if op.kind == "pull" else ():
            k = share.get(id(lane))
            if k is not None and lane[1][0] == me:           # this rank writes the rest into the loader's buffer
                src, dst = _part(lane[1], k), _part(lane[0], k)
                at = (PEER,) + dst if dst[1] is not Buf.SCRATCH else (WIN,) + dst
                pushes[op.step].append((COPY, at, _source(me, defs, lane[3], src, cma), None))
    first = min(pulling, default=None)
    for t in range(nsteps):
        pulls = [op for op in by_step[t] if op.kind == "pull"]
        local = [op for op in by_step[t] if op.kind != "pull"]
        if t == first:                                   # what needs no peer runs before the first barrier
            early = _early(me, ops, defs, local, t)
            for op in early:
                prog += _lanes(me, op, defs, cma, share)
            local = [op for op in local if op not in early]
        if t in pulling and not synced:
            prog.append((SYNC, (t, "before"), None, None))
        # each rank pushes to the ranks after it first (me + 1, ..., then 0, ...): not every rank into rank 0 at once
        prog += sorted(pushes[t], key=lambda e: (e[1][1] < me, e[1][1]))
        for group in (pulls, local):
            for op in group:
                prog += _lanes(me, op, defs, cma, share)
            if group is pulls and t in hazard:
                prog.append((SYNC, (t, "within"), None, None))
        synced = t in pulling
        if synced:
            prog.append((SYNC, (t, "after"), None, None))
    return _coalesce(prog)


def _home(me: int, defs: list[dict], d: int | None, atom: tuple) -> str:
    """Where value ``d`` of ``atom`` lives: the window when a peer reads it (scratch and peers' atoms
    always), else the user's buffer."""
    if atom[1] is Buf.SCRATCH or atom[0] != me:
        return WIN
    if d is None or defs[d].get("cma"):
        return USER
    info = defs[d]
    return WIN if any(op.rank != atom[0] for op, _ in info["readers"]) else USER


def shares(ops: list[Any], nsteps: int, least: int) -> dict[int, int]:
    """Loads whose source rank writes some or all of it: ``{id(lane): elements the loader keeps}`` (alike on
    every rank).

    A plain load (a copy, not fused into a reduce) of ``least`` elements or more qualifies where nothing else
    reads or writes its destination, nor writes its source, in that step (the push may land any time between
    the barriers). The source pushes it into the loader's buffer (``process_vm_writev``) in the same step:

    - all of it, in a step whose qualifying loads are symmetric (every rank would push as many elements as it
      loads: AllGather, AlltoAll): the kernel's write into a peer is the faster way of the two
      (benchmarks/cma_copy.py), and every rank's work stays the same;
    - else a part, from a rank with less work: per step each rank's work is the elements its lanes write (a
      reduce counts 1.5: it reads two); the source takes half the difference, at most all but ``least // 2``.
    """
    work = defaultdict(float)
    touched = defaultdict(int)                      # (atom, step) -> lanes reading or writing it
    written = set()                                 # (atom, step)
    for op in ops:
        for lane in op.lanes:
            work[(op.rank, op.step)] += lane[0][3] * (1.0 if lane[2] is None else 1.5)
            written.add((lane[0], op.step))
            for at in lane[:3]:
                if at is not None:
                    touched[(at, op.step)] += 1
    plain = defaultdict(list)                       # step -> (loader, lane) of the loads a source may push
    for op in ops:
        if op.kind != "pull":
            continue
        for lane in op.lanes:
            dst, src, t = lane[0], lane[1], op.step
            if lane[2] is None and dst[3] >= least and touched[(dst, t)] == 1 and (src, t) not in written:
                plain[t].append((op.rank, lane))
    out = {}
    for t, loads in plain.items():
        flow = defaultdict(int)                     # rank -> elements it would push less those it loads
        for loader, lane in loads:
            flow[lane[1][0]] += lane[0][3]
            flow[loader] -= lane[0][3]
        if not any(flow.values()):                  # symmetric: every load pushed whole
            out.update((id(lane), 0) for _, lane in loads)
            continue
        for loader, lane in loads:
            q, p = (loader, t), (lane[1][0], t)
            give = min(int((work[q] - work[p]) // 2), lane[0][3] - least // 2)
            if give >= least // 2:
                out[id(lane)] = lane[0][3] - give
                work[q] -= give
                work[p] += give
    return out


def _early(me: int, ops: list[Any], defs: list[dict], local: list[Any], t: int) -> list[Any]:
    """This rank's local ops of step ``t``, the first step that loads from a peer, that may run before its
    barrier: each lane reads only this rank's values from before the step and writes an atom nothing
    else touches in the step (a peer's load of it, this rank's load into it, another local op)."""
    touched = defaultdict(int)
    for op in ops:
        if op.step == t:
            for lane in op.lanes:
                for at in lane[:3]:
                    if at is not None:
                        touched[at] += 1

    def ok(lane):
        for at, d in ((lane[1], lane[3]), (lane[2], lane[4])):
            if at is not None and (at[0] != me or d is not None and defs[d]["op"] is not None
                                   and defs[d]["op"].step >= t):
                return False
        return touched[lane[0]] == 1 and lane[0] not in (lane[1], lane[2])

    return [op for op in local if op.lanes and all(ok(lane) for lane in op.lanes)]


def _part(atom: tuple, keep: int, rest: bool = True) -> tuple:
    """The elements of ``atom`` from ``keep`` on (``rest``), or its first ``keep``."""
    r, b, off, k = atom
    return (r, b, off + keep, k - keep) if rest else (r, b, off, keep)


def _lanes(me: int, op: Any, defs: list[dict], cma: bool, share: dict[int, int] | None = None) -> list[tuple]:
    """``op``'s program entries, one per lane, each followed by its copy-out when it writes a final output;
    a load shared with its source (``share``) copies only its first part."""
    out = []
    for lane in op.lanes:
        k = share.get(id(lane)) if share else None
        if k == 0:                                  # its source pushes all of it
            continue
        if k is not None:
            lane = [_part(lane[0], k, False), _part(lane[1], k, False)] + list(lane[2:])
        dst = lane[0]
        hd = _home(me, defs, lane[5], dst)
        a = _source(me, defs, lane[3], lane[1], cma)
        b = None if lane[2] is None else _source(me, defs, lane[4], lane[2], cma)
        code = COPY if b is None else UFUNC
        out.append((code, (hd,) + dst[1:], a, b))
        if defs[lane[5]]["final"] and dst[1] is Buf.OUTPUT and hd == WIN:      # copy-out, while hot
            out.append((COPY, (USER,) + dst[1:], (WIN,) + dst[1:], None))
    return out


def _source(me: int, defs: list[dict], d: int | None, atom: tuple, cma: bool) -> tuple:
    """Where an op reads value ``d`` of ``atom``: this rank's buffer or window area, or a peer's."""
    if atom[0] == me:
        return (_home(me, defs, d, atom),) + atom[1:]
    return (PEER if cma and atom[1] is not Buf.SCRATCH else WIN,) + atom


def _coalesce(prog: list[tuple]) -> list[tuple]:
    """Merge consecutive entries whose every location continues the previous one."""
    out: list[list] = []
    for code, d, a, b in prog:
        if out and code != SYNC and out[-1][0] == code and _next(out[-1][1], d) and _next(out[-1][2], a) \
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
