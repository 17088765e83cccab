"""Small helpers shared by the templates: step assembly and rank-ordered reduction."""

from __future__ import annotations

from ..ir import Action, Buf, Region, Step, copy, recv, reduce, region_unchecked, send

__all__ = ["exchange", "reduce_in_rank_order"]


def exchange(peer_send: int | None, tx: list[Region], peer_recv: int | None, rx: list[Region],
             local: list[Action] | tuple[Action, ...] = ()) -> Step:
    """One step: send ``tx`` to ``peer_send`` and receive ``rx`` from ``peer_recv``, then ``local``."""
    xfer = [send(peer_send, r) for r in tx] + [recv(peer_recv, r) for r in rx]
    return Step(tuple(xfer), tuple(local))


def reduce_in_rank_order(dst: Region, slots: list[Region | None], pos: int) -> list[Action]:
    """Local ops leaving ``dst = s_0 op s_1 op ... op s_{N-1}``, reduced in group order.

    ``slots[t]`` holds position t's contribution; ``dst`` already holds position ``pos``'s
    (``slots[pos]`` is a free scratch slot). Reducing in one fixed order on every rank is
    what makes a one-shot result bitwise identical everywhere (HCCL TwoShot: "确定性计算，
    顺序Reduce", ins_temp_all_reduce_mesh_1D_two_shot.cc). Position 1 starts with
    ``s_1 op s_0``, equal to ``s_0 op s_1`` because the four reduce ops commute exactly.
    """
    n = len(slots)
    if pos <= 1:
        order = [t for t in range(n) if t != pos]
        return [reduce(dst, slots[t]) for t in order]
    ops: list[Action] = [copy(slots[pos], dst), copy(dst, slots[0])]
    ops += [reduce(dst, slots[t]) for t in range(1, n)]
    return ops


def scratch_slot(base: int, index: int, size: int, count: int) -> Region:
    """Scratch slot ``index`` of ``size`` elements, holding ``count`` of them."""
    off = base + index * size
    return (region_unchecked if off >= 0 and count >= 0 else Region)(Buf.SCRATCH, off, count)
