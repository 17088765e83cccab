"""The measured profile selection can be handed: prices measured on one machine for some ops.

Selection defines what it needs and the caller hands it in (``select(..., profile=)``); the
implementation lives with the tuning files (:class:`pyhccl.tune.profile.MeasuredProfile`), so
selection reads no file and imports no tuner. With prices for the op, the profile chooses after
an explicit override and before HCCL's rules (docs/tuning.md).
"""

from __future__ import annotations

from typing import Protocol

from ..algo.predicates import OpCall
from ..topo.info import TopoInfo
from .cost.model import CostResult

__all__ = ["Profile"]


class Profile(Protocol):
    """Measured prices for some ops on one machine; hashable (selections are cached per profile).

    Attributes:
        label: where the prices come from, for the notes ("tuning file t.json").
        kind: what kind of source that is, for a price's note ("tuning file").
    """

    label: str
    kind: str

    def ops(self) -> set[str]:
        """HCCL op names ("AllReduce", ...) the profile has prices for."""

    def check(self, topo: TopoInfo) -> None:
        """Raise ValueError (naming the fix) unless the prices were measured on ``topo``'s machine."""

    def costs(self, op: str, topo: TopoInfo, call: OpCall) -> tuple[CostResult, dict[str, str]]:
        """The cost table for ``call`` (seconds; ``winner`` set, or None when nothing has a price) and,
        per priced name, where its price came from ("measured at 8 B", "fit", ...)."""

    def describe(self, op: str) -> list[str]:
        """Lines that say which numbers come from the profile (the first notes of a measured selection)."""
