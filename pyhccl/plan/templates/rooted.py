"""Rooted templates: Scatter and Gather (Mesh, NHR, NB, Ring), and the helpers Broadcast and Reduce share.

Broadcast and Reduce are in :mod:`.bcast_reduce`. HCCL: src/ops/scatter/template/aicpu/*.cc, the
legacy Scatter templates in src/ops/scatter/algo/template/ (NB, NHR, Ring), and the docs
(Mesh.md, Ring.md, Star.md) for what has no code. See ``__init__`` for the role contracts;
``root`` and ``pos`` are positions in ``group``, transfers name ``group[p]``.

Every template returns the same number of steps on every position of the group (idle
positions get empty steps), so that executors can run templates one after another. Scatter
and Gather need every slice's place in ``buf`` on every position (intermediate tree and ring
ranks keep slices in transit there) and use no scratch.
"""

from __future__ import annotations

from typing import Callable

from ..ir import Buf, Region, Step, recv, send
from ..slices import Slices, VSlices
from ._common import exchange
from .nhr import nhr_step_count

__all__ = ["SCATTER", "GATHER", "scatter_mesh", "scatter_nhr", "scatter_nb", "scatter_ring", "gather_mesh",
           "gather_nhr", "gather_ring", "one_slice", "nothing_to_move", "tree_scatter"]

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


def one_slice(slices: AnySlices, buf: Buf, j: int) -> list[Region]:
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


def tree_scatter(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, buf: Buf,
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


def nothing_to_move(group: tuple[int, ...], total: int) -> bool:
    return len(group) == 1 or total == 0


# -- Scatter ------------------------------------------------------------------------------

def scatter_mesh(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
                 scratch: int = 0) -> list[Step]:
    """Mesh (Star) Scatter: the root sends slice j to position j, all at once; one step.

    HCCL: src/ops/scatter/template/aicpu/ins_temp_scatter_mesh_1D.cc
    (HCCL writes into the peer's CCL and the peer copies it out; here it lands in place.)
    """
    n = len(group)
    if nothing_to_move(group, slices.total):
        return []
    if pos == root:
        xfer = [send(group[p], r) for p in ((root + k) % n for k in range(1, n))
                for r in one_slice(slices, buf, p)]
    else:
        xfer = [recv(group[root], r) for r in one_slice(slices, buf, pos)]
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
    if nothing_to_move(group, slices.total):
        return []
    return tree_scatter(group, pos, root, slices, buf, -1)


def scatter_nb(group: tuple[int, ...], pos: int, root: int, slices: AnySlices, *, buf: Buf = Buf.OUTPUT,
               scratch: int = 0) -> list[Step]:
    """NB Scatter: a binomial tree growing toward higher indices, ceil(log2 N) steps.

    HCCL: src/ops/scatter/algo/template/scatter_nb.cc
    δ = (pos - root) mod N; step s (d = 2^s): δ < d (and δ < N-d) sends the slices
    pos+d + i*2d (mod N) it holds to pos+d; d <= δ < 2d receives them from pos-d.
    """
    if nothing_to_move(group, slices.total):
        return []
    return tree_scatter(group, pos, root, slices, buf, +1)


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
    if nothing_to_move(group, slices.total):
        return []
    e = (pos - root) % n
    right, left = group[(pos + 1) % n], group[(pos - 1) % n]
    steps = []
    for t in range(n - 1):
        tx = rx = []
        if t >= e and n - 1 - t + e > e and e + 1 < n:
            tx = one_slice(slices, buf, (root + n - 1 - t + e) % n)
        if e >= 1 and t >= e - 1 and n - 2 - t + e >= e:
            rx = one_slice(slices, buf, (root + n - 2 - t + e) % n)
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


# -- tables -------------------------------------------------------------------------------

SCATTER: dict[str, Callable[..., list[Step]]] = {
    "Mesh": scatter_mesh, "NHR": scatter_nhr, "NB": scatter_nb, "Ring": scatter_ring,
}
GATHER: dict[str, Callable[..., list[Step]]] = {
    "Mesh": gather_mesh, "NHR": gather_nhr, "Ring": gather_ring,
}
