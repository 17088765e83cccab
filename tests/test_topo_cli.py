"""python -m pyhccl.topo --topo SPEC: tables and JSON without MPI, exit statuses for bad input."""

import json
import re
import subprocess
import sys
import textwrap

import pytest

from pyhccl.topo import Layout, calc_topo_info, parse_topo, summarize_sizes
from pyhccl.topo.__main__ import main


def test_json_is_the_topo_info_hccl_computes(capsys):
    assert main(["--topo", "[[[0,1,2,3],[0,1]]]", "--json", "--rank", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["topo_info"] == calc_topo_info("[[[0,1,2,3],[0,1]]]", 5).to_dict()
    assert out["topo_info_rank"] == 5 and out["source"] == "--topo" and out["nranks"] == 6
    assert out["levels"][1]["groups"] == [[0, 4], [1, 5], [2], [3]]
    lay = Layout(parse_topo("[[[0,1,2,3],[0,1]]]"))
    assert [(r["server"], r["device"], r["groups"]) for r in out["ranks"]] == \
        [(c.server, c.device, [list(g) for g in lay.groups_of(i)]) for i, c in enumerate(lay.coords)]


def test_text_tables(capsys):
    assert main(["--topo", "2x2x2"]) == 0
    out = capsys.readouterr().out
    assert "topology 2x2x2 (from --topo): 8 ranks, 2 super pod(s), 4 server(s)" in out
    assert "level 2 (same server and device index, other super pods): 4 group(s)" in out
    assert "    5    1      2      1      1  4,5 / 5,7 / 1,5" in out
    assert "  topo_level_nums" in out and "  physical_levels[2]" in out


def test_text_summarises_instance_sizes_json_keeps_them(capsys):
    assert main(["--topo", "1x128x64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    net = next(ln for ln in lines if ln.startswith("  net_layer_details"))
    assert '"inst_size_list_of_layer":["128 x 64","1 x 8192"]' in net and len(net) < 250
    phys = next(ln for ln in lines if ln.startswith("  physical_levels[0]"))
    assert '"inst_size_list_by_layer":"128 x 64"' in phys
    assert main(["--topo", "[[[0,1,2,3],[0,1,2,3],[0,1]]]"]) == 0
    assert '"inst_size_list_of_layer":["2 x 4, 1 x 2","1 x 10"]' in capsys.readouterr().out
    assert main(["--topo", "1x128x64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["topo_info"]["net_layer_details"]["inst_size_list_of_layer"] == [[64] * 128, [8192]]


def test_summarize_sizes():
    assert summarize_sizes((64,) * 128) == "128 x 64"
    assert summarize_sizes((8, 8, 4, 8)) == "2 x 8, 1 x 4, 1 x 8"
    assert summarize_sizes(()) == "-"


@pytest.mark.parametrize("argv, status, match", [
    (["--topo", "1x2"], 2, "expecting PxSxD"),
    (["--topo", "1x2x4", "--rank", "8"], 2, r"expecting rank in range\(8\), got 8"),
    (["--topo", "1x1x4;mesh_size=2"], 1, "HCCL rejects this layout on rank 0: level-0 MESH_1D instance"),
])
def test_errors(capsys, argv, status, match):
    assert main(argv) == status
    assert re.search(match, capsys.readouterr().err)


def test_module_runs_without_initialising_mpi():
    code = textwrap.dedent("""
        import runpy, sys
        sys.argv = ["pyhccl.topo", "--topo", "1x1x2", "--json"]
        try:
            runpy.run_module("pyhccl.topo", run_name="__main__")
        except SystemExit as e:
            print("mpi4py" in sys.modules, e.code, file=sys.stderr)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stderr.split() == ["False", "0"], out.stderr
    assert json.loads(out.stdout)["spec"] == "1x1x2"
