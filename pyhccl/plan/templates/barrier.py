"""Barrier templates: NHR and Mesh, on a one-element token.

HCCL: src/ops/barrier/template/aicpu/ins_temp_barrier_nhr_dpu.cc (InsTempBarrierNHR*),
src/ops/barrier/algorithm/template/aicpu/ins_temp_barrier_mesh_1D.cc (InsTempBarrierMesh1D).
HCCL's barriers move no data, only notifies. pyhccl makes the synchronisation checkable: every
position ends holding the reduction of every position's token, each counted exactly once, so
no rank can leave before every rank has arrived, and the simulator proves it.

Why not the plain dissemination barrier with a one-element token (step s: send the running sum
to pos+2^s, add what comes from pos-2^s)? After step s a rank holds the 2^(s+1) tokens
pos-2^(s+1)+1 .. pos; when N is not a power of two the last step's window wraps past N and
counts some ranks twice (N = 3: rank 0 ends with t0+t2+t1+t0). The NHR barrier here gathers the
tokens instead of summing them on the way (an NHR AllGather of 1-element slots, N-1 elements
received in all) and reduces the N slots locally in rank order: exactly once, and bitwise the
same result on every rank.
"""

from __future__ import annotations

from typing import Callable

from ..ir import Region, Step
from .mesh import allreduce_mesh_one_shot
from .nhr import allreduce_nhr_aicpu_reduce

__all__ = ["BARRIER", "barrier_nhr", "barrier_mesh"]


def barrier_nhr(group: tuple[int, ...], pos: int, token: Region, *, scratch: int = 0) -> list[Step]:
    """NHR barrier: ceil(log2 N) steps, step s exchanges with pos +- 2^(S-1-s), as HCCL's NHR barrier.

    HCCL ins_temp_barrier_nhr_dpu.cc (RunNHRBarrier: the AllGather-NHR peers, empty slices).
    pyhccl gathers the tokens into N scratch slots with the NHR AllGather and reduces them in
    rank order (= the NHRAicpuReduce AllReduce on the token). Scratch: N elements.
    """
    return allreduce_nhr_aicpu_reduce(group, pos, token, scratch=scratch)


def barrier_mesh(group: tuple[int, ...], pos: int, token: Region, *, scratch: int = 0) -> list[Step]:
    """Mesh barrier: one round, my token to every peer, then reduce the N-1 received slots.

    HCCL ins_temp_barrier_mesh_1D.cc (every rank signals every peer at once); pyhccl = the
    one-shot mesh AllReduce on the token, reduced in rank order. Scratch: N elements.
    """
    return allreduce_mesh_one_shot(group, pos, token, scratch=scratch)


#: Barrier templates by short name.
BARRIER: dict[str, Callable[..., list[Step]]] = {"NHR": barrier_nhr, "Mesh": barrier_mesh}
