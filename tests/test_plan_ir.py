"""The plan IR: printing, parsing, JSON round trips and validation."""

import json

import pytest

from pyhccl.core.call import Call
from pyhccl.plan import ALLREDUCE_ALGOS, Buf, Plan, Region, Step, build_plan
from pyhccl.plan.ir import Action, copy, recv, reduce, send


def test_region_forms():
    r = Region(Buf.SCRATCH, 8, 4, 3, 16)
    assert str(r) == "scr[8:12|3x16]"
    assert list(r.pieces()) == [(8, 4), (24, 4), (40, 4)]
    assert r.size == 12 and r.end == 44
    assert Region.parse("scr[8:12|3x16]") == r
    assert Region.parse("out[0:128]") == Region(Buf.OUTPUT, 0, 128)
    assert r.moved(Buf.OUTPUT, -8) == Region(Buf.OUTPUT, 0, 4, 3, 16)


@pytest.mark.parametrize("args, match", [
    ((Buf.INPUT, -1, 2), "offset >= 0"),
    ((Buf.INPUT, 0, -2), "count >= 0"),
    ((Buf.INPUT, 0, 2, 0), "repeat >= 1"),
    ((Buf.INPUT, 0, 2, 2), "stride exactly when repeat > 1"),
    ((Buf.INPUT, 0, 2, 1, 4), "stride exactly when repeat > 1"),
    ((Buf.INPUT, 0, 4, 2, 2), "stride >= count"),
])
def test_region_rejects(args, match):
    with pytest.raises(ValueError, match=match):
        Region(*args)


@pytest.mark.parametrize("text", ["out[0:", "foo[0:2]", "out[4:2]x"])
def test_region_parse_rejects(text):
    with pytest.raises(ValueError, match="expecting a region"):
        Region.parse(text)


def test_action_forms_round_trip():
    o, s = Region(Buf.OUTPUT, 0, 8), Region(Buf.SCRATCH, 8, 8)
    acts = [send(3, o), recv(1, s), reduce(o, s), copy(o, Region(Buf.INPUT, 0, 8))]
    assert [str(a) for a in acts] == ["S>3 out[0:8]", "R<1 scr[8:16]", "out[0:8] += scr[8:16]",
                                      "out[0:8] = in[0:8]"]
    for a in acts:
        assert Action.parse(str(a)) == a
        assert Action.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    with pytest.raises(ValueError, match="expecting an action"):
        Action.parse("X>3 out[0:8]")


@pytest.mark.parametrize("algo", ALLREDUCE_ALGOS)
@pytest.mark.parametrize("n", [1, 4, 5])
def test_plans_round_trip(algo, n):
    for r in range(n):
        p = build_plan(Call("allreduce", n, 11), algo, r)
        assert Plan.from_dict(json.loads(json.dumps(p.to_dict()))) == p
        for st in p.steps:
            assert Step.parse(str(st)) == st


def test_plan_reports():
    p = build_plan(Call("allreduce", 5, 10), "NHR", 0)
    assert p.step_count == 6                      # 2 * ceil(log2 5)
    assert p.count_sent() == 16                   # 8n/5 of the reference's worked example
    assert p.bytes_sent(4) == 64
    assert p.info("algo") == "NHR" and p.info("nranks") == 5
    text = p.describe()
    assert "6 rounds, 16 elements sent" in text and "step 1: S>4 out[4:6]; S>4 out[8:10]" in text
