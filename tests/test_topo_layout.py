"""Coordinates and level groups, the rank table subset, and where a communicator's layout comes from."""

import json

import pytest

from pyhccl.topo import (Coords, Layout, Topology, load_rank_table, parse_rank_table, parse_topo, rank_table_placement,
                         resolve_topo)
from pyhccl.topo.placement import Placement, from_nodes, inverse, node_order, restrict


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
    (lambda t: t["rank_list"][1].update(rank_id=7), r"expecting rank_id 0 .. 2 each once, got \[0, 2, 7\] "
                                                     r"\(missing \[1\]\)"),
    (lambda t: t["rank_list"][1].update(rank_id=0), r"expecting rank_id 0 .. 2 each once, got \[0, 0, 2\]"),
    (lambda t: t["rank_list"][1].update(device_id="x"), r"expecting device_id as an integer >= 0"),
    (lambda t: t["rank_list"][0]["level_list"].pop(0), r"rank 0 has no net_layer 0 entry"),
    (lambda t: t["rank_list"][2]["level_list"][0].update(net_instance_id="a"),
     r"server 'a' is in super pods 'p0' and 'p2' \(rank 2\); each server belongs to exactly one super pod"),
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


def test_rank_table_in_any_rank_order():
    """--map-by node: rank ids alternate between servers; the layout is HCCL's, the order maps it back."""
    table = v2([("p", "a", 0), ("p", "b", 0), ("p", "a", 1), ("p", "b", 1)])
    placed = rank_table_placement(table)
    assert placed.spec.layout == (((0, 1), (0, 1)),) and placed.order == (0, 2, 1, 3) and not placed.identity
    assert parse_rank_table(table) == placed.spec
    pods = v2([("q", "c", 0), ("p", "a", 0), ("q", "c", 1), ("p", "b", 0)])   # pods, servers by lowest rank
    assert rank_table_placement(pods).order == (0, 2, 1, 3)
    assert rank_table_placement(pods).spec.layout == (((0, 1),), ((0,), (0,)))


def test_placement_from_nodes():
    assert from_nodes([0, 0, 0, 3, 3]) == Placement(parse_topo([[[0, 1, 2], [0, 1]]]), (0, 1, 2, 3, 4))
    assert from_nodes([0]).spec.layout == (((0,),),)
    rr = from_nodes([0, 1, 0, 1])                     # MPIR_CVAR_NUM_CLIQUES=2: nodes {0, 2} and {1, 3}
    assert rr.spec.to_text() == "1x2x2" and rr.order == (0, 2, 1, 3) and inverse(rr.order) == (0, 2, 1, 3)
    three = from_nodes([0, 1, 2, 0, 1, 2, 0, 1], 3)    # uneven nodes {0,3,6} {1,4,7} {2,5}
    assert three.spec.layout == (((0, 1, 2), (0, 1, 2), (0, 1)),) and three.order == (0, 3, 6, 1, 4, 7, 2, 5)
    assert from_nodes([0, 1, 0, 1, 4, 5, 4, 5], 2).spec.to_text() == "2x2x2"
    with pytest.raises(ValueError, match=r"expecting PYHCCL_SUPER_POD_SERVERS to divide the 3 servers"):
        from_nodes([0, 1, 2], 2)
    assert node_order([5, 5, 0, 0, 0, 5]) == (2, 3, 4, 0, 1, 5)
    with pytest.raises(ValueError, match=r"expecting order to be a permutation of range\(2\)"):
        Placement(parse_topo("1x1x2"), (0, 0))


def test_topology_from_spec():
    t = Topology.from_spec(parse_topo("[[[0,1,2,3],[0,1]]]"), 4)
    assert (t.coords.server, t.coords.device, t.groups) == (1, 0, ((4, 5), (0, 4), (4,)))
    assert t.info.server_idx == 1 and t.spec.nranks == 6
    assert "HCCL rank 4 at super pod 0, server 1, device 0" in repr(t) and t.identity and t.comm_rank == 4
    rr = Topology.from_spec(parse_topo("1x2x2"), 1, "MPI", (0, 2, 1, 3))
    assert (rr.comm_rank, rr.hccl_rank(2), rr.groups, rr.comm_groups) == (2, 1, ((0, 1), (1, 3), (1,)),
                                                                         ((0, 2), (2, 3), (2,)))
    assert "HCCL rank 1 (communicator rank 2)" in repr(rr)


def test_restrict_to_a_sub_communicator():
    block = Placement(parse_topo("[[[0,1,2,3],[0,1]],[[0,1]]]"), tuple(range(8)))
    assert restrict(block, [0, 2, 4, 6]).spec.layout == (((0, 2), (0,)), ((0,),))
    assert restrict(block, [4, 5, 0]) == Placement(parse_topo([[[0], [0, 1]]]), (2, 0, 1))   # HCCL order kept
    mixed = restrict(block, [0, 4, 1])              # server 0's ranks not consecutive: an order, not a refusal
    assert mixed.spec.layout == (((0, 1), (0,)),) and mixed.order == (0, 2, 1)
    rr = Placement(parse_topo("1x2x2"), (0, 2, 1, 3))
    assert restrict(rr, [2, 3]) == Placement(parse_topo([[[1], [1]]]), (0, 1))     # device ids kept
