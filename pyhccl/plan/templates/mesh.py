"""Mesh (FullMesh) templates: ReduceScatter, AllGather, AllReduce one-shot and two-shot.

HCCL: src/ops/{reduce_scatter,all_gather,all_reduce}/template/aicpu/ins_temp_*_mesh_1D*.cc
Every pair of group members is directly linked, so each template is one round per phase in
which a rank exchanges with all N-1 peers at once.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..ir import Buf, Region, Step, recv, reduce, send
from ..slices import Slices
from ._common import reduce_in_rank_order, scratch_slot

__all__ = [
    "reduce_scatter_mesh",
    "all_gather_mesh",
    "allreduce_mesh_one_shot",
    "allreduce_mesh_two_shot",
    "allreduce_mesh_chunk",
    "reduce_scatter_mesh_chunk",
    "mesh_chunk_sizes",
]


def reduce_scatter_mesh(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                        scratch: int = 0, rank_order: bool = False) -> list[Step]:
    """Mesh ReduceScatter in place on ``slices``: afterwards slice ``pos`` holds the reduction.

    HCCL ins_temp_reduce_scatter_mesh_1D.cc: for k = 1..N-1 at once, peer p = (pos+k) mod N
    gets my slice p into its scratch slot ``pos``; then ``out ⊕= slot t`` for t = 0..N-1, t != pos.
    With ``rank_order`` the reduction runs in canonical order x_0 ⊕ x_1 ⊕ ... instead
    (the TwoShot AllReduce's rule). Scratch: N slots of the largest slice.

    Args:
        group: ranks of the group. pos: my index in it.
        slices: one slice per position, in ``buf``.
        scratch: scratch offset of slot 0.
    """
    n = len(group)
    if n == 1:
        return []
    mine = slices.count(pos)
    width = slices.largest
    slots = [scratch_slot(scratch, t, width, mine) for t in range(n)]
    xfer = []
    for k in range(1, n):
        p = (pos + k) % n
        r = slices.region(buf, p)
        if r is not None:
            xfer.append(send(group[p], r))
    if mine:
        xfer += [recv(group[(pos + k) % n], slots[(pos + k) % n]) for k in range(1, n)]
    local = []
    if mine:
        dst = slices.region(buf, pos)
        if rank_order:
            local = reduce_in_rank_order(dst, slots, pos)
        else:
            local = [reduce(dst, slots[t]) for t in range(n) if t != pos]
    return [Step(tuple(xfer), tuple(local))]


def all_gather_mesh(group: tuple[int, ...], pos: int, slices: Slices, *,
                    buf: Buf = Buf.OUTPUT, scratch: int = 0) -> list[Step]:
    """Mesh AllGather in place on ``slices``: slice ``pos`` goes to every peer at once.

    HCCL ins_temp_all_gather_mesh_1D.cc: one round, peer p = (pos+k) mod N for k = 1..N-1;
    HCCL's read of p's slot maps to p sending and me receiving.
    """
    n = len(group)
    if n == 1:
        return []
    mine = slices.region(buf, pos)
    xfer = []
    if mine is not None:
        xfer += [send(group[(pos + k) % n], mine) for k in range(1, n)]
    for k in range(1, n):
        p = (pos + k) % n
        r = slices.region(buf, p)
        if r is not None:
            xfer.append(recv(group[p], r))
    return [Step(tuple(xfer))]


def allreduce_mesh_one_shot(group: tuple[int, ...], pos: int, data: Region, *,
                            scratch: int = 0) -> list[Step]:
    """Mesh AllReduce one-shot in place on ``data``: one round, whole vectors to every peer.

    HCCL ins_temp_all_reduce_mesh_1D_one_shot.cc: write my whole input into every peer's slot
    ``pos``, then reduce all N slots locally (scratch multiple N). HCCL reduces in the order
    own, 0, 1, ...; pyhccl reduces in rank order so every rank ends bitwise identical.
    """
    n = len(group)
    if n == 1 or data.count == 0:
        return []
    slots = [scratch_slot(scratch, t, data.count, data.count) for t in range(n)]
    peers = [(pos + k) % n for k in range(1, n)]
    xfer = [send(group[p], data) for p in peers] + [recv(group[p], slots[p]) for p in peers]
    return [Step(tuple(xfer), tuple(reduce_in_rank_order(data, slots, pos)))]


def allreduce_mesh_two_shot(group: tuple[int, ...], pos: int, data: Region, *,
                            scratch: int = 0) -> list[Step]:
    """Mesh AllReduce two-shot in place on ``data``: mesh ReduceScatter then mesh AllGather.

    HCCL ins_temp_all_reduce_mesh_1D_two_shot.cc: "ceil" slices (SplitData), scatter phase,
    reduce in canonical rank order, gather phase. Two rounds of n/N bytes per link.
    """
    if len(group) == 1 or data.count == 0:
        return []
    slices = Slices.ceil(data.offset, data.count, len(group))
    return (reduce_scatter_mesh(group, pos, slices, buf=data.buf, scratch=scratch, rank_order=True)
            + all_gather_mesh(group, pos, slices, buf=data.buf))


def allreduce_mesh_chunk(group: tuple[int, ...], pos: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Mesh AllReduce two-shot "MeshChunk" in place on ``data``: N-1 chunked RS rounds, one AG round.

    HCCL ins_temp_all_reduce_mesh_1D_two_shot_mesh_chunk.cc: "ceil" slices; slice j cut into N-1
    chunks (the first ``cnt mod (N-1)`` one element longer). Round s = 0..N-2, chunk q = 0..N-2:
    m = s+q+1, plus one when m >= N; chunk q of slice (pos-m) goes to rank pos-m, chunk q of my
    slice comes from pos+m and is reduced into it. Every round touches all N-1 peers once.
    Then a mesh AllGather of the reduced slices. Scratch: a mirror of my slice.
    """
    n = len(group)
    if n == 1 or data.count == 0:
        return []
    slices = Slices.ceil(data.offset, data.count, n)
    tx, has, rx, red = _chunk_table(group, data.buf, slices, scratch, None)
    return _chunk_rounds(n, pos, tx, has, rx[pos], red[pos]) + all_gather_mesh(group, pos, slices, buf=data.buf)


def reduce_scatter_mesh_chunk(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                              scratch: int = 0, align: int = 1) -> list[Step]:
    """Mesh ReduceScatter "MeshChunk" in place on ``slices``: N-1 rounds, each touching every peer once.

    HCCL ins_temp_reduce_scatter_mesh_1D_meshchunk.cc. Slice j is cut into N-1 chunks (see
    :func:`mesh_chunk_sizes`; a strided slice piece by piece, as HCCL's repeatNum loop).
    Round s = 0..N-2, chunk i = 0..N-2: m = s+i+1, plus one when m >= N; chunk i of slice
    (pos-m) goes to position pos-m, chunk i of my slice comes from pos+m and is reduced into it. Over the N-1 rounds every peer sends each chunk of my slice
    once; every round uses all N-1 links with one chunk each. Bytes sent: all slices but mine.
    Scratch: my slice's size (chunk i of every round lands at its own offset).

    Args:
        group: ranks of the group. pos: my index in it.
        slices: one slice per position, in ``buf``.
        scratch: scratch offset of the mirror.
        align: chunk alignment in elements (HCCL aligns chunks to 4 KiB: 4096 // itemsize).
    """
    n = len(group)
    if n == 1 or slices.total == 0:
        return []
    tx, has, rx, red = _chunk_table(group, buf, slices, scratch, align)
    return _chunk_rounds(n, pos, tx, has, rx[pos], red[pos])


def mesh_chunk_sizes(count: int, k: int, align: int = 1) -> list[int]:
    """Sizes of the k chunks of a ``count``-element slice in the MeshChunk ReduceScatter.

    HCCL ins_temp_reduce_scatter_mesh_1D_meshchunk.cc (RunReduceScatter), in elements:
    a = floor(count/k) rounded down to a multiple of ``align``; when k >= 2 and a > 0 the
    first k-1 chunks hold a and the last the remainder; otherwise the first count mod k
    chunks hold floor(count/k)+1 and the rest floor(count/k) (small slices, and k = 1).
    """
    a = count // k // align * align
    if k >= 2 and a > 0:
        return [a] * (k - 1) + [count - a * (k - 1)]
    b, big = divmod(count, k)
    return [b + 1] * big + [b] * (k - big)


def _chunk_rounds(n: int, pos: int, tx: np.ndarray, has: np.ndarray, rx: np.ndarray | None, red: list) -> list[Step]:
    """The N-1 MeshChunk rounds of position ``pos``, drawn from the tables of :func:`_chunk_table`.

    Round s = 0..N-2, chunk q = 0..N-2: m = s+q+1, plus one when m >= N; ``tx[pos-m, q]`` (chunk q
    of slice pos-m, to its owner) goes out, ``rx[pos+m, q]`` (chunk q of my slice, from pos+m)
    comes in and ``red[q]`` reduces it into my slice. Empty chunks (None; ``has``: the sends that are
    not) are left out. The N^2 picks of a position are made as two array gathers (the rounds of every
    position hold N^3 actions in all).
    """
    k = n - 1
    m, q = _chunk_peers(n)
    out = np.empty((k, k, 2), dtype=object)     # round s: (send, receive) of chunk q, q = 0..k-1
    out[:, :, 0] = tx[(pos - m) % n, q]
    if rx is not None:                          # else my slice is empty: nothing comes in
        out[:, :, 1] = rx[(pos + m) % n, q]
    if has.all():                               # no empty chunk
        local = tuple(red)
        return [Step(tuple(row), local) for row in out.reshape(k, 2 * k).tolist()]
    keep = np.empty((k, k, 2), dtype=bool)
    keep[:, :, 0] = has[(pos - m) % n, q]
    keep[:, :, 1] = np.array([b is not None for b in red])[q]     # my chunk q empty: nothing comes in
    local = tuple(b for b in red if b is not None)
    out, keep = out.reshape(k, 2 * k), keep.reshape(k, 2 * k)
    return [Step(tuple(out[s, keep[s]].tolist()), local) for s in range(k)]


@lru_cache(maxsize=4)
def _chunk_peers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(m, q)``, each (N-1) x (N-1): round s, chunk q exchanges with the peers m = s+q+1 (plus one when m >= N)
    positions away."""
    s, q = np.indices((n - 1, n - 1))
    m = s + q + 1
    return m + (m >= n), q


@lru_cache(maxsize=4)
def _chunk_table(group: tuple[int, ...], buf: Buf, slices, scratch: int,
                 align: int | None) -> tuple[list, list, list, bool]:
    """Every MeshChunk action of a group, each built once: the plans of all positions share them
    (N^2 actions for the group where building each position's rounds anew makes N^3).

    Args:
        align: the ReduceScatter's chunks (:func:`mesh_chunk_sizes` with this alignment, of each piece
            of a strided slice); None: the AllReduce's (count // k, one more for the first count mod k).

    Returns:
        ``(tx, has, rx, red)``: ``tx[j, q]`` (an N x (N-1) object array) sends chunk q of slice j to
        position j (the same action on every sender), None where that chunk is empty (``has``: where it
        is not); ``rx[j][p, q]`` receives chunk q of position j's slice from position p into the scratch
        mirror of that slice (``rx[j]`` None: slice j is empty); ``red[j][q]`` reduces it into the slice.
    """
    n, k = len(group), len(group) - 1
    tx = np.full((n, k), None, dtype=object)
    red, rx, by_shape = [], [], {}
    for j in range(n):
        r = slices.region(buf, j)
        if r is None:
            red.append([None] * k)
            rx.append(None)
            continue
        if align is None:
            base, extra = divmod(r.count, k)
            spans = [(q * base + min(q, extra), base + (q < extra)) for q in range(k)]
        else:
            spans = _chunk_spans(r.count, k, align)
        chunks = [_within(r, off, c) if c else None for off, c in spans]
        scr = [Region(Buf.SCRATCH, scratch + off * r.repeat, c * r.repeat) if c else None for off, c in spans]
        tx[j] = [None if c is None else send(group[j], c) for c in chunks]
        red.append([None if c is None else reduce(c, sc) for c, sc in zip(chunks, scr)])
        shape = tuple(scr)
        if shape not in by_shape:
            by_shape[shape] = table = np.full((n, k), None, dtype=object)
            for p in range(n):
                table[p] = [None if sc is None else recv(group[p], sc) for sc in scr]
        rx.append(by_shape[shape])
    return tx, np.frompyfunc(lambda a: a is not None, 1, 1)(tx).astype(bool), rx, red


def _chunk_spans(count: int, k: int, align: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of each chunk of a ``count``-element slice (:func:`mesh_chunk_sizes`)."""
    out, off = [], 0
    for c in mesh_chunk_sizes(count, k, align):
        out.append((off, c))
        off += c
    return out


def _within(r: Region, off: int, count: int) -> Region:
    """Elements ``[off, off+count)`` of every piece of ``r``."""
    if r.repeat == 1:
        return Region(r.buf, r.offset + off, count)
    return Region(r.buf, r.offset + off, count, r.repeat, r.stride)
