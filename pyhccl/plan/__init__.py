"""Plan IR, slicing, templates and executors. Imports neither mpi4py nor pyhccl.run."""

from .build import ALLREDUCE_ALGOS, HCCL_NAMES, build_all_gather, build_allreduce, build_reduce_scatter, resolve_algo
from .format import format_plans
from .ir import Action, Buf, Kind, Plan, Region, Step
from .slices import Slices

__all__ = [
    "Action", "Buf", "Kind", "Plan", "Region", "Step", "Slices", "format_plans",
    "ALLREDUCE_ALGOS", "HCCL_NAMES", "resolve_algo",
    "build_allreduce", "build_reduce_scatter", "build_all_gather",
]
