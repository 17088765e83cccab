"""CalcTopoShape: every rule of topo_host.cc on emulated machines, and TopoInfo built by hand."""

import json

import pytest

from pyhccl.topo import (BIG_CLOS_RANGE, CommProtocol, CommTopo, EndpointLocType, HcclError,
                         Level0MeshType, Level0Shape, PhysicalLevelView, RankGraph, TopoInfo,
                         calc_topo_info, parse_topo)
from pyhccl.topo.rankgraph import TopoInst


def info(topo, rank=0):
    return calc_topo_info(topo, rank)


# -- step 4: the level-0 shape table, row by row -----------------------------------------------
def test_row1_one_mesh_instance_is_mesh_1d():
    i = info("1x1x4")
    assert i.level0_topo == Level0Shape.MESH_1D and not i.level0_big_clos_range
    assert dict(i.topo_inst_details_of_layer[0].rank_num_for_topo_type) == {CommTopo.MESH_1D: (4,)}


def test_row1_error_mesh_smaller_than_server():
    with pytest.raises(HcclError, match=r"level-0 MESH_1D instance has 2 ranks but this rank's server has 4"
                                        r".*HCCL_E_INTERNAL") as e:
        info("1x1x4;mesh_size=2")
    assert e.value.code == "HCCL_E_INTERNAL"


def test_row2_one_clos_instance_is_clos():
    i = info("1x1x4;level0=clos")
    assert i.level0_topo == Level0Shape.CLOS and i.level0_mesh_type == Level0MeshType.NOT_MESH
    # HCCL looks the 1D mesh up first with std::map::operator[], which leaves an empty entry.
    assert dict(i.topo_inst_details_of_layer[0].rank_num_for_topo_type) == \
        {CommTopo.CLOS: (4,), CommTopo.MESH_1D: ()}


def test_row2_error_clos_smaller_than_server():
    with pytest.raises(HcclError, match=r"level-0 CLOS instance has 3 ranks but this rank's server has 4"):
        info("1x1x4;level0=clos;clos_size=3")


def test_row3_mesh_and_clos_is_ubx_and_mesh_may_be_smaller():
    i = info("1x1x8;level0=mesh+clos;mesh_size=4", rank=5)
    assert i.level0_topo == Level0Shape.MESH_1D_CLOS
    assert dict(i.topo_inst_details_of_layer[0].rank_num_for_topo_type) == \
        {CommTopo.CLOS: (8,), CommTopo.MESH_1D: (4,)}


def test_row3_error_clos_smaller_than_server():
    with pytest.raises(HcclError, match=r"level-0 CLOS instance has 4 ranks but this rank's server has 8"):
        info("1x1x8;level0=mesh+clos;clos_size=4")


@pytest.mark.parametrize("n, big", [(BIG_CLOS_RANGE, False), (BIG_CLOS_RANGE + 1, True)])
def test_row3_big_clos_range_at_8_vs_9(n, big):
    assert info(f"1x1x{n};level0=mesh+clos").level0_big_clos_range is big
    assert info(f"1x1x{n};level0=clos").level0_big_clos_range is False      # only the UBX row sets it


class TwoMeshes(RankGraph):
    """A 2D mesh: every rank is in a row mesh and a column mesh (as HCCL's analyzer grid has)."""

    def topo_insts(self, rank, layer):
        if layer:
            return super().topo_insts(rank, layer)
        row, col = divmod(rank, 2)
        return (TopoInst(row, CommTopo.MESH_1D, (2 * row, 2 * row + 1), CommProtocol.UB_CTP),
                TopoInst(10 + col, CommTopo.MESH_1D, (col, col + 2), CommProtocol.UB_CTP))


def test_row4_anything_else_defaults_to_clos_and_physical_levels_degrade():
    i = info(TwoMeshes(parse_topo("1x1x4")), rank=3)
    assert i.level0_topo == Level0Shape.CLOS and i.level0_mesh_type == Level0MeshType.NOT_MESH
    assert i.topo_inst_details_of_layer[0].topo_inst_num == 2
    assert i.physical_levels == () and i.physical_level_num == 0    # x/y rings do not nest


# -- a 2D mesh (level0=mesh2d): the analyzer's topo_model.cc InitTopoInstsMap, read by step 4 --
def test_mesh2d_row_column_and_clos_instances_fall_to_row4_clos():
    # device ids 0..15 on the 8 x 8 grid: rows {0..7}, {8..15}; columns {c, c+8}; each device has
    # row and column peers, so it also lists the server's Clos: three instances, no row of the table
    for rank, row, col in ((0, tuple(range(8)), (0, 8)), (9, tuple(range(8, 16)), (1, 9))):
        i = info("1x1x16;level0=mesh2d", rank)
        d = i.topo_inst_details_of_layer[0]
        assert d.topo_inst_num == 3 and d.type_of_topo == (CommTopo.MESH_1D, CommTopo.MESH_1D, CommTopo.CLOS)
        assert d.ranks_in_topo == (row, col, tuple(range(16)))
        # topoInstNum 3 short-circuits every row's lookup: no empty map entry is added
        assert d.rank_num_for_topo_type == ((CommTopo.CLOS, (16,)), (CommTopo.MESH_1D, (8, 2)))
        assert i.level0_topo == Level0Shape.CLOS and i.level0_mesh_type == Level0MeshType.NOT_MESH
        assert not i.is_2die_full_mesh and not i.level0_big_clos_range
        assert i.physical_levels == ()                  # the column {0, 8} is not inside the row {0..7}


def test_mesh2d_one_row_or_column_is_a_1d_mesh():
    assert info("1x1x8;level0=mesh2d") == info("1x1x8")                 # one grid row: row 1, MESH_1D
    i = info("[[[0,8,16,24]]];level0=mesh2d", 2)                        # one grid column
    assert i.level0_topo == Level0Shape.MESH_1D
    assert i.topo_inst_details_of_layer[0].rank_num_for_topo_type == ((CommTopo.MESH_1D, (4,)),)


@pytest.mark.parametrize("topo, rank, ranks", [
    ("[[[0,9]]];level0=mesh2d", 0, 1),              # alone in row and column: its row of 1 rank
    ("[[[0,1,2,8]]];level0=mesh2d", 3, 2),          # device 8 has a column peer only
])
def test_mesh2d_ragged_grid_fails_the_level0_size_check(topo, rank, ranks):
    with pytest.raises(HcclError, match=rf"level-0 MESH_1D instance has {ranks} ranks.*level0=mesh2d"):
        info(topo, rank)


def test_mesh2d_spec_checks():
    assert parse_topo("1x1x16;level0=2dmesh").level0 == "mesh2d"
    assert parse_topo("1x1x16;level0=mesh2d").to_text() == "1x1x16;level0=mesh2d"
    with pytest.raises(ValueError, match=r"expecting device ids 0\.\.63"):
        parse_topo("1x1x65;level0=mesh2d")
    with pytest.raises(ValueError, match=r"dies=2 needs a mesh at level 0, got level0=mesh2d"):
        parse_topo("1x1x16;level0=mesh2d;dies=2")
    i = info("1x2x16;level0=mesh2d;pcie=true;clos_ports=2", 17)
    assert i.level0_pcie_mix and i.level0_topo == Level0Shape.CLOS and i.server_idx == 1


# -- step 2: the GCD rule -----------------------------------------------------------------------
@pytest.mark.parametrize("layout, nhr", [
    ([[[0, 1, 2, 3], [0, 1]]], False),                    # GCD 2: no degradation
    ([[[0, 1, 2], [0, 1]]], True),                        # GCD 1 -> Level1Nhr
    ([[list(range(8)), list(range(8)), list(range(7))]], True),
    ([[list(range(8)), list(range(4))]], False),
    ([[[0], [0], [0]]], True),
    ([[[0, 1, 2]]], False),                               # one level: the rule does not apply
])
def test_gcd_rule(layout, nhr):
    for rank in (0, sum(map(len, layout[0])) - 1):
        i = info(layout, rank)
        assert i.level1_nhr is nhr and not i.level0_nhr and not i.level1_hd


# -- step 1: levels and symmetry ----------------------------------------------------------------
@pytest.mark.parametrize("topo, levels, sym0, sym1", [
    ("1x1x4", 1, True, False),                            # level1Symmetric needs two levels
    ("1x2x4", 2, True, True),
    ("[[[0,1,2,3],[0,1]]]", 2, False, True),
    ("2x2x2", 3, True, True),
    ("[[[0,1],[0,1]],[[0,1]]]", 3, True, False),          # super pods of 4 and 2 ranks
    ("[[[0]],[[0]]]", 3, True, True),                     # 2 super pods of 1 server: still 3 levels
])
def test_levels_and_symmetry_flags(topo, levels, sym0, sym1):
    i = info(topo)
    assert (i.topo_level_nums, i.level0_symmetric, i.level1_symmetric) == (levels, sym0, sym1)
    assert i.net_layer_details.net_layers == (0, 1, 2)[:levels]


# -- steps 5 and 7: 2-die meshes ----------------------------------------------------------------
@pytest.mark.parametrize("n, two_die, mesh_type", [
    (8, True, Level0MeshType.TWO_DIE_REGULAR),            # 7 peers split 4/3
    (5, True, Level0MeshType.TWO_DIE_NOT_REGULAR),        # 4 peers split 2/2
    (2, False, Level0MeshType.SINGLE_DIE),                # <= 2 ranks
])
def test_two_die_mesh(n, two_die, mesh_type):
    i = info(f"1x1x{n};dies=2", rank=n - 1)
    assert (i.is_2die_full_mesh, i.level0_mesh_type) == (two_die, mesh_type)
    one = info(f"1x1x{n}")
    assert (one.is_2die_full_mesh, one.level0_mesh_type) == (False, Level0MeshType.SINGLE_DIE)


def test_two_die_only_counts_for_a_pure_mesh():
    i = info("1x1x8;level0=mesh+clos;dies=2")
    assert (i.is_2die_full_mesh, i.level0_mesh_type) == (False, Level0MeshType.NOT_MESH)


# -- steps 6, 8, 9, 10, 11 ----------------------------------------------------------------------
def test_level0_pcie_mix():
    assert info("1x2x4;pcie=true").level0_pcie_mix and not info("1x2x4").level0_pcie_mix


@pytest.mark.parametrize("topo, uboe", [
    ("1x2x4;level1=uboe", True),
    ("1x1x4;level1=uboe", False),                         # one level: the top level is the server
    ("2x2x2;level1=uboe", False),                         # three levels: the top is net layer 2
    ("2x2x2;level2=uboe", True),
])
def test_top_level_uboe(topo, uboe):
    assert info(topo).top_level_uboe is uboe


@pytest.mark.parametrize("topo, rtp", [("2x2x2;level2=ub_rtp", True), ("1x2x4;level2=ub_rtp", False),
                                       ("2x2x2", False)])
def test_level2_ub_rtp(topo, rtp):
    assert info(topo).level2_ub_rtp is rtp


@pytest.mark.parametrize("topo, dpu", [("1x2x4;dpu=true", True), ("2x2x2;dpu=true", True),
                                       ("1x1x4;dpu=true", False), ("1x2x4", False)])
def test_host_dpu_only(topo, dpu):
    assert info(topo).host_dpu_only is dpu


def test_is_pod():
    assert info("1x1x2;pod=true").is_pod and not info("1x1x2").is_pod


# -- InitRankInfo fields ------------------------------------------------------------------------
def test_base_fields_per_rank_on_an_asymmetric_machine():
    i = info("[[[0,1,2,3],[0,1]]]", rank=5)
    assert (i.user_rank, i.user_rank_size, i.server_idx, i.server_num, i.module_idx, i.module_num) == \
        (5, 6, 1, 2, 1, 2)
    assert (i.device_num_per_module, i.multi_module_diff_device_num_mode, i.super_pod_idx) == (2, True, 0)
    assert i.net_layer_details.local_net_ins_size_of_layer == (2, 6)
    assert (i.server_num_per_super_pod, i.super_pod_num) == (0, 0)       # set on 910_93 only


def test_super_pod_idx_is_zero_with_three_net_layers():
    # CalcMyRankInfo reads layer 1 only when the last net layer is 1.
    assert info("2x2x2", rank=7).super_pod_idx == 0 and info("2x2x2", rank=7).server_idx == 3


# -- step 12: physical levels -------------------------------------------------------------------
def test_physical_levels_nest_from_server_to_machine():
    levels = info("2x2x2;clos_ports=4", rank=5).physical_levels
    assert [lv.local_ranks for lv in levels] == [(4, 5), (4, 5, 6, 7), tuple(range(8))]
    assert [lv.inst_size_list_by_layer for lv in levels] == [(2, 2, 2, 2), (4, 4), (8,)]
    assert [lv.topo_type for lv in levels] == [CommTopo.MESH_1D, CommTopo.CLOS, CommTopo.CLOS]
    assert [lv.port_nums for lv in levels] == [(1,), (4,), (4,)]
    assert all(lv.view == PhysicalLevelView.GLOBAL and lv.loc_type == EndpointLocType.DEVICE for lv in levels)


def test_physical_levels_local_mesh_then_mesh_before_clos():
    small = info("1x1x8;level0=mesh+clos;mesh_size=4", rank=6).physical_levels
    assert [(lv.local_ranks, lv.view) for lv in small] == \
        [((4, 5, 6, 7), PhysicalLevelView.LOCAL), (tuple(range(8)), PhysicalLevelView.GLOBAL)]
    same = info("1x1x8;level0=mesh+clos").physical_levels
    assert [lv.topo_type for lv in same] == [CommTopo.MESH_1D, CommTopo.CLOS]


def test_physical_levels_host_location_with_dpu():
    levels = info("1x2x2;dpu=true;level1=roce").physical_levels
    assert [(lv.loc_type, lv.protocols) for lv in levels] == \
        [(EndpointLocType.DEVICE, (CommProtocol.UB_CTP,)), (EndpointLocType.HOST, (CommProtocol.ROCE,))]


# -- TopoInfo by hand, and errors ---------------------------------------------------------------
def test_topo_info_built_directly_and_as_json():
    i = TopoInfo(user_rank_size=16, topo_level_nums=2, level0_topo=Level0Shape.MESH_1D, level1_nhr=True)
    assert i.level0_mesh_type == Level0MeshType.NOT_MESH and i.server_idx is None
    d = json.loads(json.dumps(i.to_dict()))
    assert (d["level0_topo"], d["level1_nhr"], d["physical_levels"]) == ("MESH_1D", True, [])
    assert list(d)[:3] == ["user_rank", "user_rank_size", "server_idx"]


def test_rank_out_of_range():
    with pytest.raises(ValueError, match=r"expecting rank in range\(8\), got 8"):
        info("1x2x4", rank=8)


def test_no_mpi_imported():
    import subprocess
    import sys
    code = ("import sys, pyhccl.topo as t; t.calc_topo_info('1x2x4', 3); "
            "sys.exit(1 if 'mpi4py' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
