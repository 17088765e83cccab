"""pyhccl: HCCL's topology-aware collective algorithms over MPI.

``Communicator``, ``CollectiveTimeoutError`` and the request classes ``Request`` and ``Prequest`` are imported on first use, so that the plans and the simulator can be used
(and ``python -m pyhccl.verify`` run) without initialising MPI.
"""

from typing import TYPE_CHECKING

from .core.call import Call
from .plan import ALLREDUCE_ALGOS, Plan, build_plan, format_plans
from .verify.sim import SimulationError, simulate

if TYPE_CHECKING:
    from .comm import Communicator, Prequest, Request
    from .run.timeout import CollectiveTimeoutError

__all__ = ["Communicator", "CollectiveTimeoutError", "Request", "Prequest", "ALLREDUCE_ALGOS", "Call", "Plan", "build_plan", "format_plans",
           "SimulationError", "simulate"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "Communicator":
        from .comm import Communicator
        return Communicator
    if name in ("Request", "Prequest"):
        from . import comm
        return getattr(comm, name)
    if name == "CollectiveTimeoutError":
        from .run.timeout import CollectiveTimeoutError
        return CollectiveTimeoutError
    raise AttributeError(f"module 'pyhccl' has no attribute {name!r}")
