"""The per-op rule selectors: op (HCCL's Pascal name) -> {engine: rule function}."""

from . import allgather, allreduce, broadcast, reduce, reducescatter, scatter
from .alltoall import ALLTOALL, ALLTOALLV, ALLTOALLVC
from .base import NOT_MATCH, Answer, Ctx
from .misc import ALLGATHERV, BARRIER, BATCHSENDRECV, RECV, REDUCESCATTERV, SEND

__all__ = ["RULES", "OPS", "NOT_MATCH", "Answer", "Ctx"]

RULES = {
    "AllReduce": allreduce.RULES, "AllGather": allgather.RULES, "ReduceScatter": reducescatter.RULES,
    "Broadcast": broadcast.RULES, "Reduce": reduce.RULES, "Scatter": scatter.RULES, "AllToAll": ALLTOALL,
    "AllToAllV": ALLTOALLV, "AllToAllVC": ALLTOALLVC, "AllGatherV": ALLGATHERV, "ReduceScatterV": REDUCESCATTERV,
    "Barrier": BARRIER, "Send": SEND, "Recv": RECV, "BatchSendRecv": BATCHSENDRECV,
}
#: The op types pyhccl selects for (SelectorEngine::IsOpSupported's 15).
OPS = tuple(RULES)
