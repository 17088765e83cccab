"""Topology specs: every accepted form, the canonical text, and every malformed spec's error."""

import pytest

from pyhccl.topo import CommProtocol, TopoSpec, parse_topo


@pytest.mark.parametrize("text, layout", [
    ("1x2x4", (((0, 1, 2, 3), (0, 1, 2, 3)),)),
    (" 2X1X2 ", (((0, 1),), ((0, 1),))),
    ("[[[0,1,2,3],[0,1]]]", (((0, 1, 2, 3), (0, 1)),)),
    ("[[[4, 5]], [[0]]]", (((4, 5),), ((0,),))),
])
def test_layout_forms(text, layout):
    spec = parse_topo(text)
    assert spec.layout == layout
    assert parse_topo(spec.to_text()) == spec


def test_list_dict_and_spec_forms_agree():
    nested = [[[0, 1, 2, 3], [0, 1, 2, 3]]]
    a = parse_topo(nested)
    assert a == parse_topo({"layout": "1x2x4"}) == parse_topo({"layout": nested}) == parse_topo(a)
    assert a.to_text() == "1x2x4" and a.nranks == 8
    assert a.server_sizes == (4, 4) and a.pod_sizes == (8,)


def test_options_text_and_defaults():
    spec = parse_topo("1x1x8; level0=UBX ;clos_ports=2;dies=2;pcie=yes;level1=uboe;level2=ub_rtp;dpu=1;pod=true")
    assert (spec.level0, spec.clos_ports, spec.dies, spec.pcie, spec.dpu, spec.pod) == \
        ("mesh+clos", 2, 2, True, True, True)
    assert (spec.level1, spec.level2) == (CommProtocol.UBOE, CommProtocol.UB_RTP)
    assert parse_topo(spec.to_text()) == spec
    plain = parse_topo("1x1x8")
    assert (plain.level0, plain.mesh_size, plain.clos_size, plain.dies, plain.clos_ports, plain.pcie) == \
        ("mesh", None, None, 1, 1, False)
    assert plain.options() == {} and spec.options()["level1"] == "uboe"


def test_dict_form_takes_native_values_and_a_description():
    spec = parse_topo({"layout": [[[0, 1, 2, 3]]], "level0": "clos", "clos_ports": 4, "pcie": True,
                       "description": "ignored"})
    assert (spec.level0, spec.clos_ports, spec.pcie) == ("clos", 4, True)
    assert parse_topo('{"layout": "1x1x4", "level0": "clos"}').level0 == "clos"


def test_check_size():
    parse_topo("1x2x3").check_size(6)
    with pytest.raises(ValueError, match=r"has 8 devices but the communicator has 6 ranks.*e\.g\. '1x1x6' or '1x2x3'"):
        parse_topo("1x2x4").check_size(6)


@pytest.mark.parametrize("topo, exc, match", [
    (42, TypeError, "expecting topo as a string, nested list, dict or TopoSpec, got int"),
    ("", ValueError, "got an empty string"),
    ("1x2", ValueError, r"expecting PxSxD with positive integers.*got '1x2'"),
    ("1x0x4", ValueError, r"expecting PxSxD .*got '1x0x4'"),
    ("axbxc", ValueError, r"expecting PxSxD"),
    ("[[[0,1]]", ValueError, r"topo is not valid JSON"),
    ("[[0, 1]]", TypeError, r"topo\[0\]\[0\] is 0, expecting a list of device ids"),
    ([0], TypeError, r"topo\[0\] is 0, expecting a list of servers"),
    ("[]", ValueError, r"topo is empty, expecting at least one of super pods"),
    ([[]], ValueError, r"topo\[0\] is empty, expecting at least one of servers"),
    ([[[0], []]], ValueError, r"topo\[0\]\[1\] is empty, expecting at least one of device ids"),
    ([[[0, -1]]], ValueError, r"topo\[0\]\[0\]\[1\] is -1, expecting a device id"),
    ([[[0, "1"]]], ValueError, r"topo\[0\]\[0\]\[1\] is '1', expecting a device id"),
    ([[[True]]], ValueError, r"topo\[0\]\[0\]\[0\] is True, expecting a device id"),
    ([[[0, 1, 1]]], ValueError, r"topo\[0\]\[0\] repeats device id 1"),
    ("1x1x4;dies", ValueError, r"expecting key=value after ';' in topo, got 'dies'"),
    ("1x1x4;dies=1;dies=1", ValueError, r"topo option 'dies' is given twice"),
    ("1x1x4;levl0=clos", ValueError, r"unknown topo option 'levl0' \(did you mean level0"),
    ("1x1x4;level0=ring", ValueError, r"expecting level0 one of mesh, clos, mesh\+clos, mesh2d, got 'ring'"),
    ("1x1x4;dies=3", ValueError, r"expecting dies in 1\.\.2, got '3'"),
    ("1x1x4;clos_ports=0", ValueError, r"expecting clos_ports in 1\.\.64, got '0'"),
    ("1x1x4;clos_ports=65", ValueError, r"expecting clos_ports in 1\.\.64"),
    ("1x1x4;mesh_size=two", ValueError, r"expecting mesh_size as an integer >= 1, got 'two'"),
    ("1x1x4;pcie=maybe", ValueError, r"expecting pcie true or false, got 'maybe'"),
    ("1x1x4;level1=infiniband", ValueError, r"expecting level1 one of hccs, roce, .*got 'infiniband'"),
    ("1x1x4;level0=clos;dies=2", ValueError, r"dies=2 needs a mesh at level 0, got level0=clos"),
    ("1x1x4;level0=clos;mesh_size=2", ValueError, r"mesh_size=2 needs a mesh at level 0"),
    ("1x1x4;clos_size=2", ValueError, r"clos_size=2 needs a clos at level 0, got level0=mesh"),
    ({"level0": "mesh"}, ValueError, r"expecting a 'layout' key in the topo dict"),
    ({"layout": "1x1x2", "colour": "red"}, ValueError, r"unknown topo option 'colour'"),
])
def test_malformed_spec_errors(topo, exc, match):
    with pytest.raises(exc, match=match):
        parse_topo(topo)


def test_direct_construction_validates():
    with pytest.raises(ValueError, match=r"expecting dies in 1\.\.2, got 0"):
        TopoSpec([[[0, 1]]], dies=0)
    assert TopoSpec([[[0, 1]]], level1="roce").level1 == CommProtocol.ROCE


def test_shorthand_too_large_is_refused_naming_the_limit():
    from pyhccl.topo.spec import MAX_RANKS
    with pytest.raises(ValueError, match=f"at most {MAX_RANKS}"):
        parse_topo("1x2x99999999")
