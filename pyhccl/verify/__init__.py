"""Verification: collective calls on emulated machines through the simulator (API and ``python -m pyhccl.verify``)."""

from .api import DEFAULT_COUNT, STATUSES, Machine, VerifyResult, check, machine, make_call, verify
from .cases import default_counts, parse_ranks
from .cli import main
from .memory import MemoryBudgetError

__all__ = ["verify", "VerifyResult", "STATUSES", "DEFAULT_COUNT", "Machine", "machine", "make_call", "check",
           "parse_ranks", "default_counts", "main", "MemoryBudgetError"]
