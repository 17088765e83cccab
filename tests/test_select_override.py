"""PYHCCL_ALGO: the cost-model grammar, the legacy grammar, plain names, and their errors."""

import pytest
from select_topos import KiB, MiB, topo

from pyhccl.algo.names import OpExecuteConfig as E
from pyhccl.core import settings
from pyhccl.select import parse_override, select

AICPU = (E.AICPU_TS, E.HOSTCPU)
ALL = (E.CCU_MS, E.CCU_SCHED, E.AICPU_TS, E.HOSTCPU)


def test_grammar_parses_hccl_examples():
    for text in ("allreduce:sequence{mesh2die,nhrmultilink};sole{nhr}", "not(meshoneshot)",
                 "allgather:not(sequence{level0=mesh2die,level1=nhrmultilink})",
                 "mesh_concur;sequence{meshtwoshot,not(nhrmultilink)}", "allReduce:sequence{mesh,not(nhr)}",
                 "not(nhrmultilink);allReduce:sole{mesh2die}", "allreduce:sequence{level0=mesh,not(nhr)};not(meshoneshot)"):
        assert parse_override(text).kind == "grammar"


def test_grammar_semantics():
    o = parse_override("allreduce:sole{meshtwoshot}")
    assert o.allowed("AllReduce", ALL) == {"AicpuAllReduceSoleMeshTwoShot"}
    assert o.allowed("AllGather", ALL) is None                                  # other ops untouched
    assert parse_override("nhr").allowed("AllReduce", ALL) == {"AicpuAllReduceSoleNHR", "CcuSchedAllReduceSoleNHR"}
    left = parse_override("not(meshoneshot)").allowed("AllReduce", AICPU)
    assert "AicpuAllReduceSoleMeshOneShot" not in left and "AicpuAllReduceSoleMeshTwoShot" in left
    assert not any(n.startswith("Ccu") for n in left)                           # engine prefixes filtered
    seq = parse_override("allreduce:sequence{level0=mesh,not(nhr)}").allowed("AllReduce", ALL)
    assert seq == {"CcuSchedAllReduceSequenceMeshMesh", "AicpuAllReduceSequenceMeshNHRAicpuReduce"}  # NHRAicpuReduce != NHR
    # later segments win: the last one matches AllReduce first, the earlier one is ignored
    o = parse_override("allreduce:sole{meshtwoshot};allreduce:sole{meshoneshot}")
    assert o.allowed("AllReduce", AICPU) == {"AicpuAllReduceSoleMeshOneShot"}
    o = parse_override("allreduce:sole{meshtwoshot};allgather:sole{mesh}")
    assert o.allowed("AllReduce", AICPU) == {"AicpuAllReduceSoleMeshTwoShot"}


def test_grammar_steers_the_cost_model():
    t = topo("1x1x8")
    sel = select("AllReduce", t, 64 * KiB, "fp16", algo="allreduce:sole{meshtwoshot}", expansion_mode="AI_CPU")
    assert sel.algorithm == "AicpuAllReduceSoleMeshTwoShot" and sel.source == "cost"
    assert any("soft policies skipped" in n for n in sel.notes)
    sel = select("AllReduce", t, 64 * KiB, "fp16", algo="not(meshoneshot)", expansion_mode="AI_CPU")
    assert sel.algorithm == "AicpuAllReduceSoleNHR"                             # 56 us < TwoShot's 61 us
    excluded = [r.name for r in sel.cost_table if r.filtered == "excluded by PYHCCL_ALGO"]
    assert "AicpuAllReduceSoleMeshOneShot" in excluded


def test_grammar_leaving_nothing_is_an_error():
    with pytest.raises(ValueError, match=r"segment allreduce:sole\{mesh2die\} matches no AllReduce algorithm on "
                                         "engines AICPU_TS/HOSTCPU; valid: AicpuAllReduceSoleMeshOneShot"):
        select("AllReduce", topo("1x1x8"), 1 * KiB, algo="allreduce:sole{mesh2die}", expansion_mode="AI_CPU")
    with pytest.raises(ValueError, match="leaves no calibrated AllReduce candidate"):
        select("AllReduce", topo("1x2x8"), 1 * KiB, algo="allreduce:sole{meshoneshot}", expansion_mode="AI_CPU")


def test_plain_name():
    t = topo("1x1x8")
    sel = select("AllReduce", t, 1 * MiB, algo="AicpuAllReduceSoleNHR")
    assert (sel.algorithm, sel.source, sel.engine) == ("AicpuAllReduceSoleNHR", "override", "AICPU_TS")
    with pytest.raises(ValueError, match="does not apply here: topoLevelNums 2 > maxTopoLevelNum 1; valid"):
        select("AllReduce", topo("1x2x8"), 1 * MiB, algo="AicpuAllReduceSoleMeshOneShot")
    with pytest.raises(ValueError, match="dtype INT64 in unsupportedDataTypes"):
        select("AllReduce", t, 1 * MiB, "int64", algo="AicpuAllReduceSoleNHR")
    with pytest.raises(ValueError, match="is a AllGather algorithm, not AllReduce"):
        select("AllReduce", t, 1 * MiB, algo="AicpuAllGatherSoleMesh")
    with pytest.raises(ValueError, match="unknown algorithm 'AicpuAllReduceSoleNHRR'.*did you mean"):
        select("AllReduce", t, 1 * MiB, algo="AicpuAllReduceSoleNHRR")


def test_env_variable(monkeypatch):
    monkeypatch.setenv("PYHCCL_ALGO", "AicpuAllReduceSoleMeshTwoShot")
    assert select("AllReduce", topo("1x1x8"), 1 * KiB, algo=settings.algo()).algorithm == "AicpuAllReduceSoleMeshTwoShot"
    assert select("AllReduce", topo("1x1x8"), 1 * KiB, algo="").source == "rules"


def test_legacy_grammar_is_validated_and_has_no_effect():
    o = parse_override("level0:NA;level1:NHR")
    assert o.kind == "legacy" and o.legacy == ((None, ((0, "NA"), (1, "NHR"))),)
    o = parse_override("allreduce=level0:NA;level1:ring/allgather=level0:NA;level1:H-D_R")
    assert [op for op, _ in o.legacy] == ["allreduce", "allgather"]
    sel = select("AllReduce", topo("1x2x8"), 1 * KiB, algo="level0:NA;level1:NHR")
    assert sel.source == "rules" and any("legacy HCCL_ALGO" in n for n in sel.notes)


@pytest.mark.parametrize("text, match", [
    ("allreduce:sequence{mesh,nhrr}", "unknown template 'nhrr'.*did you mean nhr"),
    ("allreduc:sole{nhr}", "unknown op type 'allreduc'.*did you mean allreduce"),
    ("allreduce:seqence{mesh}", "unknown executor 'seqence'.*did you mean sequence"),
    ("allreduce:sole{mesh;nhr}", "';' inside braces"),
    ("allreduce:sole{mesh", "unbalanced braces"),
    ("allreduce:sole{not(mesh}", "malformed item"),
    ("level0:NA;level1:NHRR", "unknown legacy algorithm 'NHRR'.*valid: null, ring"),
    ("level0:NA;level0:NHR", "level0 repeated"),
    ("level0:NA/level1:NHR", "more than one global"),
    ("allreduce=level0:NA;level1:NHR/level0:NA", "mixes the global and the per-op"),
    ("others=level0:NA;level1:NHR", "unknown legacy op 'others'"),
    ("allreduce=level0:null;level1:NHR", "per-op level0 may not be null"),
    ("level7:NHR", "malformed legacy entry"),
    ("  ", "non-empty string"),
])
def test_errors(text, match):
    with pytest.raises(ValueError, match=match):
        parse_override(text)
