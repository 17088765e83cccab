"""Coordinates and level groups, the rank table subset, and where a communicator's layout comes from."""

import json
import logging

import pytest

from pyhccl.topo import Coords, Layout, Topology, load_rank_table, parse_rank_table, parse_topo, resolve_topo
from pyhccl.topo.topology import _spec_from_nodes


def layout(topo):
    return Layout(parse_topo(topo))


def test_two_servers_of_four():
    lay = layout("1x2x4")
    assert lay.coords[6] == Coords(super_pod=0, server=1, device=2, device_id=2, server_in_pod=1)
    assert lay.levels == (((0, 1, 2, 3), (4, 5, 6, 7)),
                          ((0, 4), (1, 5), (2, 6), (3, 7)),
                          tuple((r,) for r in range(8)))
    assert lay.groups_of(6) == ((4, 5, 6, 7), (2, 6), (6,))


def test_asymmetric_three_plus_one():
    lay = layout([[[0, 1, 2], [0]]])
    assert [c.server for c in lay.coords] == [0, 0, 0, 1]
    assert lay.levels[:2] == (((0, 1, 2), (3,)), ((0, 3), (1,), (2,)))
    assert lay.groups_of(1) == ((0, 1, 2), (1,), (1,))


def test_three_levels_follow_hccl_numbering():
    # rank = idx0 + L0*idx1 + L0*L1*idx2 (hccl-templates.md §0.4)
    lay = layout("2x2x2")
    for rank in range(8):
        idx0, idx1, idx2 = rank % 2, rank // 2 % 2, rank // 4
        g0, g1, g2 = lay.groups_of(rank)
        assert g0 == tuple(idx1 * 2 + idx2 * 4 + i for i in range(2))
        assert g1 == tuple(idx0 + 2 * i + idx2 * 4 for i in range(2))
        assert g2 == tuple(idx0 + idx1 * 2 + 4 * i for i in range(2))


def test_device_ids_are_labels_groups_use_the_index():
    lay = layout([[[4, 5], [0, 1]]])
    assert lay.coords[2].device_id == 0 and lay.coords[0].device_id == 4
    assert lay.levels[1] == ((0, 2), (1, 3))


def test_groups_of_out_of_range():
    with pytest.raises(ValueError, match=r"expecting rank in range\(4\), got 4"):
        layout("1x1x4").groups_of(4)


# -- rank tables --------------------------------------------------------------------------------
def v2(ranks, **top):
    return {"version": "2.0", "status": "completed", "rank_count": len(ranks), **top,
            "rank_list": [{"rank_id": r, "device_id": d, "local_id": d, "level_list":
                           [{"net_layer": 0, "net_instance_id": s, "net_type": "TOPO_FILE_DESC"},
                            {"net_layer": 1, "net_instance_id": p, "net_type": "CLOS"}]}
                          for r, (p, s, d) in enumerate(ranks)]}


def test_rank_table_v2(tmp_path):
    ranks = [("pod0", "a", 0), ("pod0", "a", 1), ("pod0", "b", 0), ("pod1", "c", 0)]
    path = tmp_path / "rt.json"
    path.write_text(json.dumps(v2(ranks)))
    spec = load_rank_table(path)
    assert spec.layout == (((0, 1), (0,)), ((0,),)) and spec.level0 == "mesh"
    table = v2(ranks[:2])
    for r in table["rank_list"]:
        r["level_list"][0]["net_type"] = "CLOS"
    assert parse_rank_table(table).level0 == "clos"


def test_rank_table_v1_with_super_pods():
    table = {"version": "1.2", "server_count": "2",
             "server_list": [{"server_id": "10.0.0.1", "device": [{"device_id": "0", "rank_id": "0"},
                                                                  {"device_id": "1", "rank_id": "1"}]},
                             {"server_id": "10.0.0.2", "device": [{"device_id": "0", "rank_id": "2"}]}],
             "super_pod_list": [{"super_pod_id": "0", "server_list": [{"server_id": "10.0.0.1"}]},
                                {"super_pod_id": "1", "server_list": [{"server_id": "10.0.0.2"}]}]}
    assert parse_rank_table(table).layout == (((0, 1),), ((0,),))
    del table["super_pod_list"]
    assert parse_rank_table(table).layout == (((0, 1), (0,)),)


@pytest.mark.parametrize("mutate, match", [
    (lambda t: t.update(version="3.0"), r"expecting version '2.0', '1.0' or '1.2', got '3.0'"),
    (lambda t: t.update(status="initializing"), r"expecting status 'completed', got 'initializing'"),
    (lambda t: t.update(rank_count=5), r"rank_count is 5 but rank_list has 3 ranks"),
    (lambda t: t.update(rank_list=[]), r"expecting a non-empty list 'rank_list'"),
    (lambda t: t["rank_list"][1].update(rank_id=7), r"expecting rank_id 1 next .*got 2"),
    (lambda t: t["rank_list"][1].update(device_id="x"), r"expecting device_id as an integer >= 0"),
    (lambda t: t["rank_list"][0]["level_list"].pop(0), r"rank 0 has no net_layer 0 entry"),
    (lambda t: t["rank_list"][2]["level_list"][0].update(net_instance_id="a"),
     r"the ranks of server 'a' are not consecutive \(rank 2\)"),
    (lambda t: t["rank_list"][2]["level_list"][1].update(net_instance_id="p0"),
     r"the ranks of super pod 'p0' are not consecutive \(rank 2\)"),
    (lambda t: t["rank_list"][0]["level_list"][0].update(net_type="CLOS"), r"one layer-0 net_type"),
    (lambda t: t["rank_list"].append("r3"), r"expecting an object with 'rank_id', got 'r3'"),
    (lambda t: t["rank_list"][0]["level_list"].append(7), r"expecting an object with 'net_layer', got 7"),
    (lambda t: t["rank_list"][1].update(device_id=-1), r"expecting device_id as an integer >= 0 .*got -1"),
    (lambda t: t["rank_list"][1].update(rank_id=True), r"expecting rank_id as an integer >= 0 .*got True"),
    (lambda t: t["rank_list"][1]["level_list"][1].pop("net_instance_id"),
     r"rank 1's net_layer 1 entry has no net_instance_id"),
    (lambda t: t.update(rank_count="__import__('os')"), r"expecting rank_count as an integer >= 0"),
])
def test_rank_table_errors(mutate, match):
    table = v2([("p0", "a", 0), ("p1", "b", 0), ("p2", "c", 0)])
    mutate(table)
    with pytest.raises(ValueError, match=match):
        parse_rank_table(table)


def test_rank_table_v1_errors_and_files(tmp_path):
    with pytest.raises(ValueError, match=r"super_pod_list names servers \['x'\] but server_list has \['a'\]"):
        parse_rank_table({"version": "1.2", "server_list": [{"server_id": "a", "device": [{"device_id": 0}]}],
                          "super_pod_list": [{"super_pod_id": "0", "server_list": [{"server_id": "x"}]}]})
    with pytest.raises(ValueError, match=r"expecting an object with 'rank_id', got 'd0'"):
        parse_rank_table({"version": "1.0", "server_list": [{"server_id": "a", "device": ["d0"]}]})
    with pytest.raises(ValueError, match=r"expecting a JSON object, got list"):
        parse_rank_table([])
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ValueError, match=r"rank table .*bad.json is not valid JSON"):
        load_rank_table(bad)
    with pytest.raises(FileNotFoundError):
        load_rank_table(tmp_path / "missing.json")


# -- precedence and detection -------------------------------------------------------------------
def test_precedence(tmp_path):
    table = tmp_path / "rt.json"
    table.write_text(json.dumps(v2([("p", "a", 0), ("p", "b", 0)])))
    env = {"PYHCCL_TOPO": "1x1x2", "PYHCCL_RANK_TABLE": str(table)}
    assert resolve_topo("1x2x1", env) == (parse_topo("1x2x1"), "topo=")
    assert resolve_topo(None, env) == (parse_topo("1x1x2"), "PYHCCL_TOPO")
    assert resolve_topo(None, {"PYHCCL_TOPO": " ", "PYHCCL_RANK_TABLE": str(table)}) == \
        (parse_topo("1x2x1"), f"PYHCCL_RANK_TABLE={table}")
    assert resolve_topo(None, {}) == (None, "MPI")


def test_spec_from_nodes(caplog):
    assert _spec_from_nodes([0, 0, 0, 3, 3]).layout == (((0, 1, 2), (0, 1)),)
    assert _spec_from_nodes([0]).layout == (((0,),),)
    with caplog.at_level(logging.WARNING, logger="pyhccl"):
        assert _spec_from_nodes([0, 1, 0, 1]).layout == (((0, 1, 2, 3),),)
    assert "non-consecutively" in caplog.text


def test_topology_from_spec():
    t = Topology.from_spec(parse_topo("[[[0,1,2,3],[0,1]]]"), 4)
    assert (t.coords.server, t.coords.device, t.groups) == (1, 0, ((4, 5), (0, 4), (4,)))
    assert t.info.server_idx == 1 and t.spec.nranks == 6
    assert "rank 4 at super pod 0, server 1, device 0" in repr(t)


def test_restrict_to_a_sub_communicator():
    lay = layout("[[[0,1,2,3],[0,1]],[[0,1]]]")
    assert lay.restrict([0, 2, 4, 6]) == [[[0, 2], [0]], [[0]]]
    assert lay.restrict([4, 5, 0]) == [[[0, 1], [0]]]          # servers in any order, each in one run
    assert lay.restrict([0, 4, 1]) is None                      # server 0's ranks not consecutive
    assert lay.restrict([0, 6, 4]) is None                      # super pod 0's ranks not consecutive
