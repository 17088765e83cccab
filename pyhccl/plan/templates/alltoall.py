"""AlltoAll(V) templates: grouped full mesh and Pairwise.

HCCL: src/ops/all_to_all_v/template/aicpu/ins_temp_all_to_all_v_mesh_1D.cc (grouped full mesh);
doc docs/zh/user_guide/coll_algo_intro/Pairwise.md (Pairwise, no template in src/ops).
One template serves AlltoAll, AlltoAllV and AlltoAllVC: ``send[j]`` / ``recv[j]`` are my block
for position j and my slot for position j's block, of any size, None (or empty) for nothing.
Both templates emit the same number of steps on every position that has any block, so ranks
stay step-aligned whatever the sizes; a position with no block at all returns ``[]``.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..ir import Action, Region, Step, copy, recv, send, with_regions

__all__ = ["A2A", "ALLTOALLV_DIRECT_FULLMESH_CONCURRENT_SIZE", "alltoall_mesh", "alltoall_pairwise",
           "mesh_rounds", "moved_on"]

#: Peers one rank talks to at once in the grouped full mesh (ins_temp_all_to_all_v_mesh_1D.h).
ALLTOALLV_DIRECT_FULLMESH_CONCURRENT_SIZE = 16


def mesh_rounds(n: int, pos: int, concurrent: int = ALLTOALLV_DIRECT_FULLMESH_CONCURRENT_SIZE) -> list[list[int]]:
    """The peers (positions) of every round of the grouped full mesh, for position ``pos`` of ``n``.

    HCCL ins_temp_all_to_all_v_mesh_1D.cc (CalcCommLoops, CalcCommRankSetForOneLoop):
    C = min(concurrent, N-1) peers at once, P = ceil(C/2) distances per round,
    rounds = ceil((N-1)/C); round q talks to pos-i and pos+i for i = q*P+1 .. q*P+P.
    Distance i reaches {pos+i, pos-i}, one peer when 2i = N. HCCL shortens the last round to
    ceil(remaining/2) distances; that is the same as capping i at floor(N/2), which this does,
    so every peer is met exactly once over the rounds for every N (the tests check N <= 200),
    and a peer that meets me at distance +i meets me at -i in the same round, so both ends
    put a transfer in the same round. With HCCL's C = 16 (even) the rounds are exactly
    ceil((N-1)/C). For an odd cap below N-1 (not used by HCCL's AlltoAll; the order-preserving
    Group template's 31 threads) P = floor(C/2), so a round never exceeds C peers; the round
    count is then ceil(floor(N/2)/P), which equals ceil((N-1)/C) for even C.
    """
    if n <= 1:
        return []
    c = min(concurrent, n - 1)
    p = -(-c // 2) if c == n - 1 else max(1, c // 2)
    last = n // 2
    rounds = []
    for q in range(-(-last // p)):
        peers: list[int] = []
        for i in range(q * p + 1, min(q * p + p, last) + 1):
            left, right = (pos - i) % n, (pos + i) % n
            peers += [left] if left == right else [left, right]
        rounds.append(peers)
    return rounds


def alltoall_mesh(group: tuple[int, ...], pos: int, send_blocks: Sequence[Region | None],
                  recv_blocks: Sequence[Region | None], *, scratch: int = 0,
                  concurrent: int = ALLTOALLV_DIRECT_FULLMESH_CONCURRENT_SIZE) -> list[Step]:
    """AlltoAll(V) grouped full mesh: ceil((N-1)/C) rounds of at most C = min(16, N-1) peers.

    HCCL ins_temp_all_to_all_v_mesh_1D.cc: round q exchanges blocks with the peers of
    :func:`mesh_rounds`; the own block is copied locally in round 0. HCCL writes into the
    peer's CCL slot and the peer copies it out; pyhccl receives straight into ``recv``, so no
    scratch is used. Every rank sends its N-1 blocks once: bytes = sum of its send blocks.

    Args:
        group: ranks of the group. pos: my index in it.
        send_blocks: ``send_blocks[j]``: my block for position j (None: nothing).
        recv_blocks: ``recv_blocks[j]``: where position j's block for me goes (None: nothing).
        scratch: unused (accepted for the role signature).
        concurrent: HCCL's ALLTOALLV_DIRECT_FULLMESH_CONCURRENT_SIZE.
    """
    if not _anything(send_blocks, recv_blocks):
        return []
    rounds = mesh_rounds(len(group), pos, concurrent)
    steps = [_exchange(group, rnd, rnd, send_blocks, recv_blocks) for rnd in rounds] or [Step()]
    own = _own_copy(pos, send_blocks, recv_blocks)
    steps[0] = Step(steps[0].transfers, steps[0].local + own)
    return steps


def alltoall_pairwise(group: tuple[int, ...], pos: int, send_blocks: Sequence[Region | None],
                      recv_blocks: Sequence[Region | None], *, scratch: int = 0) -> list[Step]:
    """AlltoAll(V) Pairwise: step k = 1..N-1 sends my block for pos+k to pos+k, receives from pos-k.

    HCCL doc Pairwise.md: one send and one receive per step (no many-to-many on one port);
    N-1 steps, each rank sends each of its N-1 blocks once. The own block is copied locally
    in the first step. No scratch.
    """
    if not _anything(send_blocks, recv_blocks):
        return []
    n = len(group)
    steps = [_exchange(group, [(pos + k) % n], [(pos - k) % n], send_blocks, recv_blocks)
             for k in range(1, n)] or [Step()]
    own = _own_copy(pos, send_blocks, recv_blocks)
    steps[0] = Step(steps[0].transfers, steps[0].local + own)
    return steps


def moved_on(steps: Sequence[Step], group: tuple[int, ...], pos: int, send_blocks: Sequence[Region | None],
             recv_blocks: Sequence[Region | None]) -> list[Step]:
    """Position ``pos``'s steps made from position 0's ``steps``: every position moved on by ``pos``.

    Both templates use their position only as ``pos + i`` and ``pos - i`` (mod N), and a block
    only as ``send_blocks[p]`` / ``recv_blocks[p]`` of such a position ``p``. So position
    ``pos``'s steps are position 0's, with each peer ``group[p]`` read as ``group[p + pos]``
    and each block ``send_blocks[j]`` (``recv_blocks[j]``) as ``send_blocks[j + pos]``
    (``recv_blocks[j + pos]``), where position 0's steps were made with the very tables given
    here (the tests compare both ways of building). A plan set built so is rank 0's rotated by
    construction, which the simulator uses past a few hundred ranks
    (:func:`pyhccl.plan.api.rotation_built`).

    Raises:
        ValueError: a peer of ``steps`` not in ``group``, or a region that is not one of the blocks.
    """
    n = len(group)
    if not pos:
        return list(steps)
    peers = {g: group[(j + pos) % n] for j, g in enumerate(group)}
    blocks = {b: table[(j + pos) % n] for table in (send_blocks, recv_blocks)
              for j, b in enumerate(table) if b is not None}
    blocks[None] = None
    try:
        return [Step(tuple([with_regions(a, peers[a.peer], blocks[a.src], blocks[a.dst]) for a in s.transfers]),
                     tuple([with_regions(a, None, blocks[a.src], blocks[a.dst]) for a in s.local])) for s in steps]
    except KeyError as e:
        raise ValueError(f"expecting every peer of position 0's AlltoAll steps in its group and every region one "
                         f"of its blocks, got {e.args[0]}") from None


#: AlltoAll(V) templates by short name.
A2A: dict[str, Callable[..., list[Step]]] = {"Mesh": alltoall_mesh, "Pairwise": alltoall_pairwise}


def _live(r: Region | None) -> bool:
    return r is not None and r.size > 0


def _anything(send_blocks: Sequence[Region | None], recv_blocks: Sequence[Region | None]) -> bool:
    return any(map(_live, send_blocks)) or any(map(_live, recv_blocks))


def _exchange(group: tuple[int, ...], to: list[int], frm: list[int], send_blocks: Sequence[Region | None],
              recv_blocks: Sequence[Region | None]) -> Step:
    xfer: list[Action] = [send(group[p], send_blocks[p]) for p in to if _live(send_blocks[p])]
    xfer += [recv(group[p], recv_blocks[p]) for p in frm if _live(recv_blocks[p])]
    return Step(tuple(xfer))


def _own_copy(pos: int, send_blocks: Sequence[Region | None], recv_blocks: Sequence[Region | None]) -> tuple:
    src, dst = send_blocks[pos], recv_blocks[pos]
    if _live(src) and _live(dst) and src != dst:
        return (copy(dst, src),)
    return ()
