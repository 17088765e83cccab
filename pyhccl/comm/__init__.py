"""pyhccl's Communicator: mpi4py's methods, HCCL's algorithms.

Modules, each with one job: :mod:`.communicator` (the Communicator: settings, mpi4py's methods,
forwarding), :mod:`.dispatch` (the path of a call and the caches), :mod:`.agree` (choosing, agreeing
on and building the algorithm), :mod:`.check` (PYHCCL_CHECK and the abort after a timeout),
:mod:`.warm` (the warm path), :mod:`.nonblocking` and :mod:`.requests` (the ``I*`` and
``*_init`` collectives and their MPI requests), :mod:`.buffers` (mpi4py buffer specs, DLPack, device arrays),
:mod:`.job` and :mod:`.parsers` (a method's arguments -> a :class:`~.job.Job`).
"""

from .buffers import SUPPORTED_DTYPES, SUPPORTED_OPS, dtype_by_name
from .check import CheckError
from .communicator import Communicator
from .requests import Prequest, Request

__all__ = ["Communicator", "Request", "Prequest", "CheckError", "SUPPORTED_DTYPES", "SUPPORTED_OPS", "dtype_by_name"]
