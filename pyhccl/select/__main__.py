"""python -m pyhccl.select: print HCCL's decision for one op on an emulated topology (no MPI).

Example: ``python -m pyhccl.select --topo 1x2x8 allreduce --size 64M --dtype fp16``.
"""

from __future__ import annotations

import argparse
import sys

from ..core import settings
from ..core.units import parse_size
from ..topo import calc_topo_info
from ..tune.profile import measured_profile
from .cascade import DEVICES, ENGINE_KEYS, EXPANSION_MODES
from .rules import RULES
from .selection import MODES, SelectionError, select


def main(argv: list[str] | None = None) -> int:
    """Run the explain CLI; returns the exit status (2 on a usage error, 1 when nothing matches)."""
    p = argparse.ArgumentParser(prog="python -m pyhccl.select", description=__doc__.splitlines()[0])
    p.add_argument("op", help=f"op: {', '.join(RULES)} (case-insensitive)")
    p.add_argument("--topo", required=True, help="topology spec, e.g. 1x2x8 or '1x1x8;level0=mesh+clos'")
    p.add_argument("--rank", type=int, default=0, help="rank whose TopoInfo to use (default 0)")
    p.add_argument("--size", default="1M", help="HCCL's data size D, e.g. 64M (default 1M)")
    p.add_argument("--dtype", default="fp32", help="fp16, fp32, bfp16, int8, int64, ... (default fp32)")
    p.add_argument("--op", dest="reduce_op", default="sum", choices=("sum", "prod", "max", "min"))
    p.add_argument("--device", default="950", choices=tuple(DEVICES))
    p.add_argument("--expansion-mode", choices=tuple(EXPANSION_MODES), help="HCCL_OP_EXPANSION_MODE")
    p.add_argument("--mode", choices=MODES, help="selector mode (default PYHCCL_SELECTOR or auto)")
    p.add_argument("--engine", choices=ENGINE_KEYS, help="start from this engine")
    p.add_argument("--no-cascade", action="store_true", help="with --engine: that engine's rule answer only")
    p.add_argument("--algo", help="PYHCCL_ALGO text (default: the environment variable)")
    p.add_argument("--inplace", action="store_true")
    p.add_argument("--deterministic", default="false", choices=("false", "true", "strict"))
    p.add_argument("--symmetric-memory", action="store_true")
    p.add_argument("--tuning", default=None, metavar="FILE",
                   help="a tuning file: the measured profile chooses (default PYHCCL_TUNING_FILE; '' for none)")
    a = p.parse_args(argv)
    try:
        topo = calc_topo_info(a.topo, a.rank)
        env = settings.selection(a.algo, a.mode, a.expansion_mode)
        sel = select(a.op, topo, parse_size(a.size), a.dtype, a.reduce_op, device=a.device, engine=a.engine,
                     cascade=not a.no_cascade, inplace=a.inplace, deterministic=a.deterministic,
                     symmetric_memory=a.symmetric_memory, profile=measured_profile(settings.tuning_file(a.tuning)),
                     **env)
    except SelectionError as exc:
        print(exc.selection)
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(sel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
