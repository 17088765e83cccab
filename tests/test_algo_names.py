"""Algorithm names by their parts, and HCCL's engine enumerations and their mapping."""

import pytest

from pyhccl.algo import (CostEngine, HcclEngine, OpExecuteConfig, engine_of, format_name, names, parse_name,
                         to_cost_engine, to_exec_config, to_hccl_engine)


def test_parse_parts():
    p = parse_name("CcuSchedAllReduceParallelMeshNHR")
    assert (p.engine_prefix, p.op, p.executor, p.templates) == ("CcuSched", "AllReduce", "Parallel", ("Mesh", "NHR"))
    assert p.engine == OpExecuteConfig.CCU_SCHED
    p = parse_name("AicpuAllToAllVCSolePairwise")
    assert (p.op, p.templates) == ("AllToAllVC", ("Pairwise",))
    assert parse_name("AicpuAllReduceSoleMeshConcur").templates == ("MeshConcur",)
    assert parse_name("CcuMSAllReduceSoleMeshOneShot").templates == ("MeshOneShot",)


def test_every_registered_name_round_trips():
    for name in names():
        assert format_name(parse_name(name)) == name


def test_grammar_breakers_keep_the_rest():
    p = parse_name("CcuMsBroadcastConcurMeshNHR")            # sic lower-case "Ms"
    assert p.engine_prefix == "CcuMs" and p.engine == OpExecuteConfig.AICPU_TS
    p = parse_name("DpuBroadcastOmniPipeMeshNHR")
    assert p.executor == "" and p.templates == () and p.rest == "OmniPipeMeshNHR"
    assert parse_name("DpuSendSoleHost").rest == "Host"


def test_engine_of_defaults_to_aicpu():
    assert engine_of("InsAllReduceParallelRSAGUBX") == OpExecuteConfig.AICPU_TS
    assert engine_of("DpuAllReduceSequenceMeshNHR") == OpExecuteConfig.HOSTCPU
    assert engine_of("AivAllReduceSoleMeshOneShot") == OpExecuteConfig.AIV


def test_engine_mapping():
    assert [to_exec_config(e) for e in HcclEngine] == [OpExecuteConfig.AICPU_TS, OpExecuteConfig.CCU_MS,
                                                        OpExecuteConfig.CCU_SCHED, OpExecuteConfig.AIV,
                                                        OpExecuteConfig.HOSTCPU]
    for e in HcclEngine:
        assert to_hccl_engine(to_exec_config(e)) == e
    assert to_hccl_engine(OpExecuteConfig.AIV_ONLY) == HcclEngine.AIV
    assert to_hccl_engine(OpExecuteConfig.CCU_FAIL) is None
    assert to_cost_engine(OpExecuteConfig.CCU_SCHED) == CostEngine.CCU
    assert to_cost_engine(OpExecuteConfig.HOSTCPU) == CostEngine.CPU
    assert int(OpExecuteConfig.CCU_MS) == 5 and int(CostEngine.CPU) == 4


def test_errors():
    with pytest.raises(ValueError, match="has no op type"):
        parse_name("AicpuFooSoleMesh")
    with pytest.raises(TypeError, match="expecting name as str"):
        parse_name(3)
