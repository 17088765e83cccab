"""``python -m pyhccl.topo``: print a layout (one table per level) and the TopoInfo HCCL computes.

``python -m pyhccl.topo --topo SPEC`` needs no MPI: it lays out the spec and computes the
TopoInfo of ``--rank``. ``mpiexec -n N python -m pyhccl.topo`` asks MPI: every rank computes its
own topology as a communicator does (``PYHCCL_TOPO``, ``PYHCCL_RANK_TABLE``, else detection),
and rank 0 prints every rank's coordinates and groups as that rank computed them, in HCCL's
numbering (server by server) beside the communicator's (MPI's) ranks when the launcher placed
the ranks of a node apart (``--rank`` is an MPI rank).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import traceback
from typing import Any, Sequence

from .calc import calc_topo_info
from .info import summarize_sizes
from .layout import LEVEL_NAMES, Layout
from .spec import parse_topo
from .topology import comm_topology

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pyhccl.topo", description=__doc__.splitlines()[0])
    p.add_argument("--topo", help="a spec such as 1x2x4 or '[[[0,1,2,3],[0,1]]]' (no MPI); "
                                  "without it, ask MPI (run under mpiexec)")
    p.add_argument("--rank", type=int, default=0, help="whose TopoInfo to print (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (2 for a bad spec or rank, 1 if HCCL rejects it)."""
    args = _parser().parse_args(argv)
    if args.topo is not None:
        return _offline(args)
    return _with_mpi(args)


def _offline(args: argparse.Namespace) -> int:
    try:
        spec = parse_topo(args.topo)
        layout = Layout(spec)
        layout.groups_of(args.rank)
    except (TypeError, ValueError) as e:
        print(f"python -m pyhccl.topo: {e}", file=sys.stderr)
        return 2
    try:
        info = calc_topo_info(spec, args.rank).to_dict()
    except ValueError as e:
        print(f"python -m pyhccl.topo: HCCL rejects this layout on rank {args.rank}: {e}", file=sys.stderr)
        return 1
    views = [(layout.coords[r], layout.groups_of(r)) for r in range(layout.nranks)]
    _print(layout, "--topo", views, tuple(range(layout.nranks)), args.rank, info, args.json)
    return 0


def _with_mpi(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    try:
        if not 0 <= args.rank < comm.Get_size():
            raise ValueError(f"expecting --rank in range({comm.Get_size()}), got {args.rank}")
        t = comm_topology(comm)
    except (TypeError, ValueError) as e:       # raised alike on every rank
        if comm.Get_rank() == 0:
            print(f"python -m pyhccl.topo: {e}", file=sys.stderr)
        return 2
    views = comm.gather((t.rank, t.coords, t.groups))
    infos = comm.gather(t.info.to_dict() if comm.Get_rank() == args.rank else None)
    if comm.Get_rank() == 0:
        by_hccl = [v[1:] for v in sorted(views, key=lambda v: v[0])]
        _print(t.layout, t.source, by_hccl, t.order, args.rank, infos[args.rank], args.json)
    return 0


def _print(layout: Layout, source: str, views: list, order: tuple[int, ...], rank: int, info: dict[str, Any],
           as_json: bool) -> None:
    """``views``: (coords, groups) by HCCL rank; ``order[h]``: the MPI rank at HCCL rank ``h``; ``rank``: MPI's."""
    spec = layout.spec

    def mpi(group: Sequence[int]) -> list[int]:
        return [order[h] for h in group]
    if as_json:
        print(_compact(json.dumps({
            "spec": spec.to_text(), "source": source, "nranks": layout.nranks, "order": list(order),
            "levels": [{"level": i, "name": LEVEL_NAMES[i], "groups": level,
                        "mpi_groups": [mpi(g) for g in level]} for i, level in enumerate(layout.levels)],
            "ranks": [{"rank": r, "mpi_rank": order[r], "super_pod": c.super_pod, "server": c.server,
                       "device": c.device, "device_id": c.device_id, "groups": groups,
                       "mpi_groups": [mpi(g) for g in groups]} for r, (c, groups) in enumerate(views)],
            "topo_info_rank": rank, "topo_info": info}, indent=1)))
        return
    identity = list(order) == list(range(len(order)))
    print(f"topology {spec.to_text()} (from {source}): {layout.nranks} ranks, {len(spec.pod_sizes)} super "
          f"pod(s), {len(spec.server_sizes)} server(s)" + ("" if identity else
          "; HCCL numbers ranks server by server, MPI placed them otherwise: both numberings below"))
    for i, level in enumerate(layout.levels):
        print(f"\nlevel {i} ({LEVEL_NAMES[i]}): {len(level)} group(s)")
        for g, ranks in enumerate(level):
            print(f"  group {g:<4} ranks {' '.join(map(str, ranks))}"
                  + ("" if identity else f"   (MPI ranks {' '.join(map(str, mpi(ranks)))})"))
    print(f"\n{'rank':>5} {'mpi':>5} {'pod':>4} {'server':>6} {'device':>6} {'dev_id':>6}  "
          "level-0 / level-1 / level-2 groups (HCCL ranks)")
    for r, (c, groups) in enumerate(views):
        print(f"{r:>5} {order[r]:>5} {c.super_pod:>4} {c.server:>6} {c.device:>6} {c.device_id:>6}  "
              + " / ".join(",".join(map(str, g)) for g in groups))
    print(f"\nTopoInfo of MPI rank {rank} (HCCL's TopoInfoWithNetLayerDetails; instance sizes as runs, "
          "'128 x 64' = 128 instances of 64 ranks; --json lists them in full):")
    for key, value in _summarized(info).items():
        if key in ("topo_inst_details_of_layer", "physical_levels"):
            for i, item in enumerate(value):
                print(f"  {key + f'[{i}]':<38} {json.dumps(item, separators=(',', ':'))}")
        else:
            text = json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else value
            print(f"  {key:<38} {text}")


def _summarized(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` with every per-layer list of instance sizes written as runs (summarize_sizes)."""
    net = dict(info["net_layer_details"])
    net["inst_size_list_of_layer"] = [summarize_sizes(s) for s in net["inst_size_list_of_layer"]]
    levels = [dict(p, inst_size_list_by_layer=summarize_sizes(p["inst_size_list_by_layer"]))
              for p in info["physical_levels"]]
    return dict(info, net_layer_details=net, physical_levels=levels)


def _compact(text: str) -> str:
    """Indented JSON with every innermost list of numbers or strings on one line."""
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)


if __name__ == "__main__":
    try:
        status = main()
    except Exception:
        if "mpi4py" not in sys.modules:         # --topo: no MPI job to abort
            raise
        traceback.print_exc()                   # abort the job so that no rank hangs
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)
    sys.exit(status)
