"""Templates: pure functions ``template(group, pos, region, *, ...) -> list[Step]``."""

from .mesh import (all_gather_mesh, allreduce_mesh_chunk, allreduce_mesh_one_shot, allreduce_mesh_two_shot,
                   reduce_scatter_mesh)
from .nhr import all_gather_nhr, allreduce_nhr, allreduce_nhr_aicpu_reduce, nhr_step_count, reduce_scatter_nhr
from .rhd import allreduce_rhd
from .ring import all_gather_ring, allreduce_ring, reduce_scatter_ring

__all__ = [
    "all_gather_mesh", "allreduce_mesh_chunk", "allreduce_mesh_one_shot", "allreduce_mesh_two_shot", "reduce_scatter_mesh",
    "all_gather_nhr", "allreduce_nhr", "allreduce_nhr_aicpu_reduce", "nhr_step_count", "reduce_scatter_nhr",
    "allreduce_rhd",
    "all_gather_ring", "allreduce_ring", "reduce_scatter_ring",
]
