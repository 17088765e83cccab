"""Rooted templates: Scatter, Gather, Broadcast and Reduce (Mesh, NHR, NB, Ring, RHD, Star).

HCCL: src/ops/{scatter,broadcast,reduce}/template/aicpu/*.cc, the legacy Scatter templates in
src/ops/scatter/algo/template/ (NB, NHR, Ring), and the docs (Mesh.md, Ring.md, RHD.md, Star.md)
for what has no code. See ``__init__`` for the role contracts; ``root`` and ``pos`` are
positions in ``group``, transfers name ``group[p]``.

Every template returns the same number of steps on every position of the group (idle
positions get empty steps), so that executors can run templates one after another. Scatter
and Gather need every slice's place in ``buf`` on every position (intermediate tree and ring
ranks keep slices in transit there) and use no scratch.
"""

from __future__ import annotations

from typing import Callable

from ..ir import Buf, Region, Step, copy, recv, reduce, send
from ..slices import Slices, VSlices
from ._common import exchange, reduce_in_rank_order, scratch_slot
from .mesh import reduce_scatter_mesh
from .nhr import all_gather_nhr, allreduce_nhr, nhr_step_count

__all__ = [
    "SCATTER", "GATHER", "BCAST", "REDUCE",
    "scatter_mesh", "scatter_nhr", "scatter_nb", "scatter_ring",
    "gather_mesh", "gather_nhr", "gather_ring",
    "broadcast_mesh", "broadcast_mesh_two_shot", "broadcast_nhr", "broadcast_ring", "broadcast_rhd",
    "reduce_mesh", "reduce_mesh_two_shot", "reduce_nhr", "reduce_nhr_aicpu_reduce", "reduce_ring",
]

AnySlices = Slices | VSlices


# -- helpers ------------------------------------------------------------------------------

def _progression(slices: AnySlices, buf: Buf, first: int, step: int, k: int, n: int) -> list[Region]:
    """Non-empty slices ``(first + i*step) mod n`` for ``i < k`` as ascending runs.

    ``step > 0`` and ``k*step < n + step`` (the index wraps past n at most once), so the
    result is at most two runs; both ends of a transfer compute the same list.
    """
    if k <= 0:
        return []
    first %= n
    c1 = min(k, -(-(n - first) // step))
    out = slices.regions(buf, first, step, c1)
    if k > c1:
        out += slices.regions(buf, first + c1 * step - n, step, k - c1)
    return out


def _one(slices: AnySlices, buf: Buf, j: int) -> list[Region]:
    r = slices.region(buf, j)
    return [] if r is None else [r]


def _reversed(steps: list[Step]) -> list[Step]:
    """The time-reversal of a pure-transfer schedule: steps in reverse order, every send a receive.

    A send of region X to p becomes a receive from p into X and vice versa; the per-pair order
    is kept, so the two ends still agree.
    """
    out = []
    for st in reversed(steps):
        xfer = tuple(recv(a.peer, a.src) if a.src is not None else send(a.peer, a.dst) for a in st.transfers)
        out.append(Step(xfer))
    return out


def _tree_scatter(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, buf: Buf,
                  sign: int) -> list[Step]:
    """Binomial-tree scatter shared by NHR (``sign = -1``: toward lower indices) and NB (``+1``).

    With u = sign*(j - root) mod N the distance of slice j from the root along the tree
    direction and δ mine: step s (d = 2^s), a position with δ < d holds the slices u ≡ δ (mod d)
    and sends those with u ≡ δ + d (mod 2d), u < N, to the position at δ + d (its peer pos +
    sign*d). Only slices the sender holds are sent (HCCL's NHR quirk of one junk slot for some
    N is skipped), so every position receives exactly its subtree's slices.
    """
    n = len(group)
    delta = (sign * (pos - root)) % n
    steps = []
    for s in range(nhr_step_count(n)):
        d = 1 << s
        tx: list[Region] = []
        rx: list[Region] = []
        to = frm = None
        if delta < d and delta + d < n:
            k = (n - 1 - delta - d) // (2 * d) + 1            # u = δ+d + i*2d < N
            to = (pos + sign * d) % n
            tx = _slices_at(slices, buf, root, sign, delta + d, 2 * d, k, n)
        elif d <= delta < 2 * d:
            k = (n - 1 - delta) // (2 * d) + 1
            frm = (pos - sign * d) % n
            rx = _slices_at(slices, buf, root, sign, delta, 2 * d, k, n)
        steps.append(exchange(None if to is None else group[to], tx, None if frm is None else group[frm], rx))
    return steps


def _slices_at(slices: AnySlices, buf: Buf, root: int, sign: int, u0: int, du: int, k: int,
               n: int) -> list[Region]:
    """Slices at tree distances u0 + i*du (i < k), i.e. slice indices root + sign*u mod n."""
    if sign > 0:
        return _progression(slices, buf, root + u0, du, k, n)
    return _progression(slices, buf, root - u0 - (k - 1) * du, du, k, n)


def _nothing(group: tuple[int, ...], total: int) -> bool:
    return len(group) == 1 or total == 0


# -- Scatter ------------------------------------------------------------------------------

def scatter_mesh(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
                 scratch: int = 0) -> list[Step]:
    """Mesh (Star) Scatter: the root sends slice j to position j, all at once; one step.

    HCCL: src/ops/scatter/template/aicpu/ins_temp_scatter_mesh_1D.cc
    (HCCL writes into the peer's CCL and the peer copies it out; here it lands in place.)
    """
    n = len(group)
    if _nothing(group, slices.total):
        return []
    if pos == root:
        xfer = [send(group[p], r) for p in ((root + k) % n for k in range(1, n))
                for r in _one(slices, buf, p)]
    else:
        xfer = [recv(group[root], r) for r in _one(slices, buf, pos)]
    return [Step(tuple(xfer))]


def scatter_nhr(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
                scratch: int = 0) -> list[Step]:
    """NHR Scatter: a binomial tree growing toward lower indices, ceil(log2 N) steps.

    HCCL: src/ops/scatter/template/aicpu/ins_temp_scatter_nhr.cc
    δ = (root - pos) mod N; step s (d = 2^s): δ < min(d, N-d) sends to pos-d the slices
    (pos-d - i*2d) mod N it holds; d <= δ < 2d receives them from pos+d. The root sends N-1
    slices in all ((N-1)/N of the data). HCCL's junk slot (N = 7, root 0, step 1: rank 6 sends
    {4, 0} holding only 4) is not sent.
    """
    if _nothing(group, slices.total):
        return []
    return _tree_scatter(group, pos, root, slices, buf, -1)


def scatter_nb(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
               scratch: int = 0) -> list[Step]:
    """NB Scatter: a binomial tree growing toward higher indices, ceil(log2 N) steps.

    HCCL: src/ops/scatter/algo/template/scatter_nb.cc
    δ = (pos - root) mod N; step s (d = 2^s): δ < d (and δ < N-d) sends the slices
    pos+d + i*2d (mod N) it holds to pos+d; d <= δ < 2d receives them from pos-d.
    """
    if _nothing(group, slices.total):
        return []
    return _tree_scatter(group, pos, root, slices, buf, +1)


def scatter_ring(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
                 scratch: int = 0) -> list[Step]:
    """Ring Scatter, pipelined: N-1 steps, data flows to pos+1, farthest slice first.

    HCCL: src/ops/scatter/algo/template/scatter_ring.cc
    With e = (pos - root) mod N: at step t = 0..N-2 the position at e sends the slice of the
    position at distance N-1-t+e (the root its own data, others what arrived at step t-1) to
    e+1 when that distance is beyond e, and receives distance N-2-t+e from e-1 when that is
    at least e. So the root sends N-1 slices, the position at e forwards N-1-e and keeps its own.
    """
    n = len(group)
    if _nothing(group, slices.total):
        return []
    e = (pos - root) % n
    right, left = group[(pos + 1) % n], group[(pos - 1) % n]
    steps = []
    for t in range(n - 1):
        tx = rx = []
        if t >= e and n - 1 - t + e > e and e + 1 < n:
            tx = _one(slices, buf, (root + n - 1 - t + e) % n)
        if e >= 1 and t >= e - 1 and n - 2 - t + e >= e:
            rx = _one(slices, buf, (root + n - 2 - t + e) % n)
        steps.append(exchange(right, tx, left, rx))
    return steps


# -- Gather -------------------------------------------------------------------------------

def gather_mesh(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
                scratch: int = 0) -> list[Step]:
    """Mesh (Star) Gather: every position sends its slice to the root at once; one step.

    HCCL: docs/zh/user_guide/coll_algo_intro/Star.md (no Gather template in src/ops)
    """
    return _reversed(scatter_mesh(group, pos, root, slices, buf=buf))


def gather_nhr(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
               scratch: int = 0) -> list[Step]:
    """NHR Gather: the time-reversal of the NHR Scatter tree, ceil(log2 N) steps.

    HCCL: src/ops/scatter/template/aicpu/ins_temp_scatter_nhr.cc (reversed; HCCL has no Gather template)
    Step s = 0..S-1 mirrors scatter step S-1-s: the position at δ + d sends the slices of its
    subtree to δ, distances growing 1, 2, 4, ...; the root receives N-1 slices.
    """
    return _reversed(scatter_nhr(group, pos, root, slices, buf=buf))


def gather_ring(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
                scratch: int = 0) -> list[Step]:
    """Ring Gather, pipelined: the reverse of the ring Scatter, N-1 steps, data flows to pos-1.

    HCCL: src/ops/scatter/algo/template/scatter_ring.cc (reversed); doc Ring.md
    At step 0 every position sends its own slice toward the root; later steps forward what
    arrived, nearest slices first; the root receives one slice per step.
    """
    return _reversed(scatter_ring(group, pos, root, slices, buf=buf))


# -- Broadcast ----------------------------------------------------------------------------

def broadcast_mesh(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Mesh (Star) Broadcast: the root writes the whole vector to every peer; one step.

    HCCL: src/ops/broadcast/template/aicpu/ins_temp_broadcast_mesh_1D.cc (InsTempBroadcastMesh1D)
    """
    n = len(group)
    if _nothing(group, data.count):
        return []
    if pos == root:
        xfer = [send(group[(root + k) % n], data) for k in range(1, n)]
    else:
        xfer = [recv(group[root], data)]
    return [Step(tuple(xfer))]


def broadcast_mesh_two_shot(group: tuple[int, ...], pos: int, root: int, data: Region, *,
                            scratch: int = 0) -> list[Step]:
    """Mesh Broadcast two-shot: scatter chunks with the root's own, then a mesh AllGather of non-roots.

    HCCL: src/ops/broadcast/template/aicpu/ins_temp_broadcast_mesh_1D_two_shot.cc
    "ceil" chunks (ceil(count/N) each). Step 1: the root sends every non-root j chunk j and
    then chunk ``root``. Step 2 (N > 2): every non-root sends its chunk j to the other N-2
    non-roots (the root takes no part). Per link 2 chunks from the root, 1 between non-roots.
    """
    n = len(group)
    if _nothing(group, data.count):
        return []
    ch = Slices.ceil(data.offset, data.count, n)
    buf = data.buf
    others = [(root + k) % n for k in range(1, n)]
    if pos == root:
        first = Step(tuple(send(group[j], r) for j in others
                           for r in _one(ch, buf, j) + _one(ch, buf, root)))
        second = Step()
    else:
        first = Step(tuple(recv(group[root], r) for r in _one(ch, buf, pos) + _one(ch, buf, root)))
        peers = [j for j in others if j != pos]
        mine = _one(ch, buf, pos)
        second = Step(tuple([send(group[j], r) for j in peers for r in mine]
                            + [recv(group[j], r) for j in peers for r in _one(ch, buf, j)]))
    return [first, second] if n > 2 else [first]


def broadcast_nhr(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """NHR Broadcast: NHR Scatter of "floor + tail" slices, then NHR AllGather; 2*ceil(log2 N) steps.

    HCCL: src/ops/broadcast/template/aicpu/ins_temp_broadcast_nhr.cc
    """
    if _nothing(group, data.count):
        return []
    slices = Slices.floor_tail(data.offset, data.count, len(group))
    return (_tree_scatter(group, pos, root, slices, data.buf, -1)
            + all_gather_nhr(group, pos, slices, buf=data.buf))


def broadcast_ring(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Ring Broadcast, unpipelined: the whole vector goes around the ring, N-1 steps.

    HCCL: docs/zh/user_guide/coll_algo_intro/Ring.md (Broadcast row (p-1)α + (p-1)nβ; no template)
    Step t = 0..N-2: the position at distance t to the right of the root sends the whole
    vector to its right neighbour.
    """
    n = len(group)
    if _nothing(group, data.count):
        return []
    e = (pos - root) % n
    steps = []
    for t in range(n - 1):
        tx = [data] if e == t else []
        rx = [data] if e == t + 1 else []
        steps.append(exchange(group[(pos + 1) % n], tx, group[(pos - 1) % n], rx))
    return steps


def broadcast_rhd(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """RHD Broadcast: distance halving over 2^floor(log2 N) positions, then one send to the rest.

    HCCL: docs/zh/user_guide/coll_algo_intro/RHD.md (doc only; cost ceil(log2 N)(α + nβ))
    With x = N - 2^floor(log2 N), the first 2x positions pair up (2u, 2u+1) and the member of
    the root's parity (the even one when the root is not among them) joins the block. In the
    block (virtual ranks, w = v XOR v_root) step i sends the whole vector from w ≡ 0 to
    w + 2^(k-1-i) (distance halving); a last step sends it to the x left-out partners.
    """
    n = len(group)
    if _nothing(group, data.count):
        return []
    p2 = 1 << (n.bit_length() - 1)
    extra = n - p2
    k = p2.bit_length() - 1
    par = root % 2 if root < 2 * extra else 0

    def virt(p: int) -> int:
        return p // 2 if p < 2 * extra else p - extra

    def real(v: int) -> int:
        return group[2 * v + par if v < extra else v + extra]

    joined = pos >= 2 * extra or pos % 2 == par
    steps = []
    if joined:
        v = virt(pos)
        w = v ^ virt(root)
        for i in range(k):
            dist = p2 >> (i + 1)
            if w % (2 * dist) == 0:
                steps.append(exchange(real(v ^ dist), [data], None, []))
            elif w % (2 * dist) == dist:
                steps.append(exchange(None, [], real(v ^ dist), [data]))
            else:
                steps.append(Step())
        if extra:
            steps.append(exchange(group[pos ^ 1], [data], None, []) if pos < 2 * extra else Step())
    else:
        steps = [Step()] * k + [exchange(None, [], group[pos ^ 1], [data])]
    return steps


# -- Reduce -------------------------------------------------------------------------------

def reduce_mesh(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Mesh Reduce one-shot: every position writes its whole vector into the root's slot; root reduces.

    HCCL: src/ops/reduce/template/aicpu/reduce_mesh_1D.cc
    One step; the root receives N-1 whole vectors into scratch slots (N slots of ``count``)
    and reduces them in group order (bitwise the same whatever the root).
    """
    n = len(group)
    if _nothing(group, data.count):
        return []
    if pos != root:
        return [Step((send(group[root], data),))]
    c = data.count
    slots = [scratch_slot(scratch, t, c, c) for t in range(n)]
    xfer = tuple(recv(group[t], slots[t]) for t in ((root + k) % n for k in range(1, n)))
    return [Step(xfer, tuple(reduce_in_rank_order(data, slots, root)))]


def reduce_mesh_two_shot(group: tuple[int, ...], pos: int, root: int, data: Region, *,
                         scratch: int = 0) -> list[Step]:
    """Mesh Reduce two-shot: mesh ReduceScatter of "ceil" slices, then every slice to the root.

    HCCL: src/ops/reduce/template/aicpu/reduce_mesh_1D_two_shot.cc
    Two steps; the ReduceScatter reduces in canonical rank order (as the TwoShot AllReduce),
    the gather is HCCL's root read, here the owners send. Scratch: N slots of ceil(count/N).
    """
    n = len(group)
    if _nothing(group, data.count):
        return []
    slices = Slices.ceil(data.offset, data.count, n)
    steps = reduce_scatter_mesh(group, pos, slices, buf=data.buf, scratch=scratch, rank_order=True)
    if pos == root:
        xfer = [recv(group[p], r) for p in ((root + k) % n for k in range(1, n))
                for r in _one(slices, data.buf, p)]
    else:
        xfer = [send(group[root], r) for r in _one(slices, data.buf, pos)]
    return steps + [Step(tuple(xfer))]


def reduce_nhr(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """NHR Reduce: an NHR AllReduce (RS-NHR + AG-NHR), every position ends with the result.

    HCCL: src/ops/reduce/template/aicpu/reduce_nhr.cc (only the root copies out; here every
    position's ``data`` holds the result). 2*ceil(log2 N) steps, scratch: ``count``.
    """
    return allreduce_nhr(group, pos, data, scratch=scratch)


def reduce_nhr_aicpu_reduce(group: tuple[int, ...], pos: int, root: int, data: Region, *,
                            scratch: int = 0) -> list[Step]:
    """NHR Reduce with a CPU-side reduce (64-bit types, PROD): AG-NHR of whole vectors, root reduces.

    HCCL: src/ops/reduce/template/aicpu/reduce_aicpu_reduce_nhr.cc
    A local step copies ``data`` into scratch slot ``pos`` (N slots of ``count``), the NHR
    AllGather fills every slot (ceil(log2 N) steps, (N-1)*count sent per position), and after
    its last step the root reduces the slots into ``data`` in group order.
    """
    n = len(group)
    if _nothing(group, data.count):
        return []
    c = data.count
    slots = [scratch_slot(scratch, t, c, c) for t in range(n)]
    steps = [Step(local=(copy(slots[pos], data),))]
    steps += all_gather_nhr(group, pos, Slices(scratch, n, c, n, 0), buf=Buf.SCRATCH)
    if pos == root:
        last = steps[-1]
        steps[-1] = Step(last.transfers, last.local + tuple(reduce_in_rank_order(data, slots, root)))
    return steps


def reduce_ring(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Ring Reduce, unpipelined: a partial sum of whole vectors travels root+1 -> root+2 -> ... -> root.

    HCCL: docs/zh/user_guide/coll_algo_intro/Ring.md (Reduce row (p-1)α + (p-1)nβ + (p-1)nγ; no template)
    N-1 steps: at step t the position at distance t+1 right of the root sends its partial sum
    to its right neighbour, which receives it into scratch (``count``) and reduces it into
    ``data``. The reduction order is fixed by the root (deterministic for a given root).
    """
    n = len(group)
    if _nothing(group, data.count):
        return []
    e = (pos - root) % n or n           # the root is the chain's end, distance N
    tmp = Region(Buf.SCRATCH, scratch, data.count)
    steps = []
    for t in range(n - 1):
        tx = [data] if e == t + 1 else []
        rx = [tmp] if e == t + 2 else []
        local = [reduce(data, tmp)] if rx else []
        steps.append(exchange(group[(pos + 1) % n], tx, group[(pos - 1) % n], rx, local))
    return steps


# -- tables -------------------------------------------------------------------------------

SCATTER: dict[str, Callable[..., list[Step]]] = {
    "Mesh": scatter_mesh, "NHR": scatter_nhr, "NB": scatter_nb, "Ring": scatter_ring,
}
GATHER: dict[str, Callable[..., list[Step]]] = {
    "Mesh": gather_mesh, "NHR": gather_nhr, "Ring": gather_ring,
}
BCAST: dict[str, Callable[..., list[Step]]] = {
    "Mesh": broadcast_mesh, "MeshTwoShot": broadcast_mesh_two_shot, "NHR": broadcast_nhr,
    "Ring": broadcast_ring, "RHD": broadcast_rhd,
}
REDUCE: dict[str, Callable[..., list[Step]]] = {
    "Mesh": reduce_mesh, "MeshTwoShot": reduce_mesh_two_shot, "NHR": reduce_nhr,
    "NHRAicpuReduce": reduce_nhr_aicpu_reduce, "Ring": reduce_ring,
}
