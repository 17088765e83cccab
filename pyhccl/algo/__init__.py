"""HCCL algorithms: names by their parts, engine enums, and the registry with declared attributes."""

from .attrs import OpAttrs, TopoAttrs, check_op, check_topo
from .dtypes import DATATYPE_SIZE, HcclDataType, HcclReduceOp, parse_dtype, parse_reduce_op
from .names import (CostEngine, HcclEngine, OpExecuteConfig, AlgName, engine_of, format_name, parse_name,
                    to_cost_engine, to_exec_config, to_hccl_engine)
from .predicates import OpCall
from .registry import Registration, Tpl, get, names, registrations

__all__ = ["AlgName", "parse_name", "format_name", "engine_of", "HcclEngine", "OpExecuteConfig", "CostEngine",
           "to_exec_config", "to_hccl_engine", "to_cost_engine", "HcclDataType", "HcclReduceOp", "DATATYPE_SIZE",
           "parse_dtype", "parse_reduce_op", "TopoAttrs", "OpAttrs", "check_topo", "check_op", "OpCall",
           "Registration", "Tpl", "get", "names", "registrations"]
