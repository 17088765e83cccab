"""pyhccl: HCCL's topology-aware collective algorithms over MPI."""

from .comm import Communicator
from .plan import ALLREDUCE_ALGOS, Plan, build_allreduce, format_plans
from .run.sim import SimulationError, simulate

__all__ = ["Communicator", "ALLREDUCE_ALGOS", "Plan", "build_allreduce", "format_plans",
           "SimulationError", "simulate"]
__version__ = "0.1.0"
