"""core: what every layer shares: the collective call (:class:`Call`, :class:`OpSpec`, the op-name
normaliser), units, and every ``PYHCCL_*`` setting (:mod:`.settings`). Imports nothing of pyhccl."""

from .call import HCCL_OPS, OPS, Call, Contrib, OpSpec, canonical_op, get_opspec
from .units import format_size, parse_size

__all__ = ["Call", "Contrib", "OpSpec", "OPS", "HCCL_OPS", "canonical_op", "get_opspec", "parse_size", "format_size"]
