"""HCCL data types, their sizes, and reduce ops, with the names users type for them.

HCCL source: src/ops/op_common/inc/alg_param.h (``DATATYPE_SIZE_TABLE``), HCOMM's hccl_types.h
(``HcclDataType``, ``HcclReduceOp``), src/common/hccl_common.h (the gap at 13).
"""

from __future__ import annotations

import enum

from .names import close_matches

__all__ = ["HcclDataType", "HcclReduceOp", "DATATYPE_SIZE", "parse_dtype", "parse_reduce_op",
           "IS_64BIT", "IS_8BIT", "FLOAT_TYPES"]


class HcclDataType(enum.IntEnum):
    """``HcclDataType`` (value 13 is a reserved gap in HCCL)."""

    INT8 = 0
    INT16 = 1
    INT32 = 2
    FP16 = 3
    FP32 = 4
    INT64 = 5
    UINT64 = 6
    UINT8 = 7
    UINT16 = 8
    UINT32 = 9
    FP64 = 10
    BFP16 = 11
    INT128 = 12
    HIF8 = 14
    FP8E4M3 = 15
    FP8E5M2 = 16
    FP8E8M0 = 17


class HcclReduceOp(enum.IntEnum):
    """``HcclReduceOp``."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3


#: Element size in bytes (alg_param.h ``DATATYPE_SIZE_TABLE``).
DATATYPE_SIZE: dict[HcclDataType, int] = dict(zip(HcclDataType, (1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2, 16, 1, 1, 1, 1)))
#: ``Is64BitDataType`` (auto_selector_base.cc).
IS_64BIT = frozenset({HcclDataType.INT64, HcclDataType.UINT64, HcclDataType.FP64})
#: ``Is8BitDataType`` (auto_selector_base.cc): int8 only.
IS_8BIT = frozenset({HcclDataType.INT8})
#: The strict-order float types (order_preserved_common.h; also alg_attrs.h SUPPORTED_FLOAT_ONLY).
FLOAT_TYPES = frozenset({HcclDataType.FP16, HcclDataType.FP32, HcclDataType.BFP16, HcclDataType.FP64})

_ALIASES = {
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8",
    "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "float16": "FP16", "half": "FP16",
    "float32": "FP32", "float": "FP32", "float64": "FP64", "double": "FP64", "bfloat16": "BFP16",
    "bf16": "BFP16", "int128": "INT128", "int": "INT32", "char": "INT8",
}


def parse_dtype(dtype) -> HcclDataType:
    """The HcclDataType for an HCCL name (``fp16``, ``BFP16``), numpy name or numpy dtype.

    Raises:
        ValueError: unknown name; the message lists the valid ones.
    """
    if isinstance(dtype, HcclDataType):
        return dtype
    name = getattr(dtype, "name", dtype)
    if not isinstance(name, str):
        raise TypeError(f"expecting dtype as str or numpy dtype, got {type(dtype).__name__}")
    key = _ALIASES.get(name.lower(), name.upper())
    if key not in HcclDataType.__members__:
        valid = [m.lower() for m in HcclDataType.__members__] + sorted(_ALIASES)
        raise ValueError(f"unknown dtype {name!r}{close_matches(name.lower(), valid)}; "
                         f"valid: {', '.join(m.lower() for m in HcclDataType.__members__)}")
    return HcclDataType[key]


def parse_reduce_op(op) -> HcclReduceOp:
    """The HcclReduceOp for ``sum``/``prod``/``max``/``min`` (any case) or an HcclReduceOp.

    Raises:
        ValueError: unknown name; the message lists the valid ones.
    """
    if isinstance(op, HcclReduceOp):
        return op
    if not isinstance(op, str) or op.upper() not in HcclReduceOp.__members__:
        raise ValueError(f"unknown reduce_op {op!r}; valid: sum, prod, max, min")
    return HcclReduceOp[op.upper()]
