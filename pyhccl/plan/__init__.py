"""Plan IR, slicing, templates and executors. Imports neither mpi4py nor pyhccl.run."""

from .api import NotRunnableError, algorithms, build_plan, flat_names, hccl_names, resolve_name
from .format import format_plans
from .ir import Action, Buf, Kind, Plan, Region, Step
from .slices import Slices, VSlices
from .templates import AR as ALLREDUCE_ALGOS

__all__ = [
    "Action", "Buf", "Kind", "Plan", "Region", "Step", "Slices", "VSlices", "format_plans",
    "ALLREDUCE_ALGOS", "NotRunnableError", "algorithms", "build_plan", "flat_names", "hccl_names", "resolve_name",
]
