"""The tuning file: measured times and fitted coefficients for one machine, as validated JSON data.

Written by ``python -m pyhccl.bench <op> --algo all --tune FILE``; read by
``PYHCCL_TUNING_FILE=FILE`` or ``Communicator(..., tuning=FILE)``. The file is data only: it is
parsed with :mod:`json` (no pickle, no eval) and every field is checked against the schema
below before use; an error names the offending field. The schema is in docs/tuning.md.
"""

from __future__ import annotations

import json
import math
import os
from bisect import bisect_left
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.call import HCCL_OPS
from ..topo.info import TopoInfo
from ..topo.machine import machine

__all__ = ["SCHEMA", "VERSION", "Point", "LevelCoeff", "Fit", "Tuning", "TuningError", "load_tuning",
           "load_tuning_cached",
           "NATIVE", "LEVELS"]

SCHEMA = "pyhccl-tuning"
VERSION = 1
#: The wrapped MPI library's own collective, a candidate only the measured profile may choose.
NATIVE = "NativeMPI"
#: Levels a coefficient set has: 0 within a server, 1 across servers of a super pod, 2 across pods.
LEVELS = 3
_MAX_BYTES = 1 << 50


class TuningError(ValueError):
    """A tuning file that cannot be used: malformed, of another schema, or of another machine."""


@dataclass(frozen=True)
class Point:
    """One measurement: ``op`` (HCCL's name) with ``algorithm`` at HCCL's data size ``nbytes``."""

    op: str
    algorithm: str
    nbytes: int
    time_us: float
    dtype: str = "float32"
    size: int = 0            # the benchmark's size column (the whole buffer), for reading


@dataclass(frozen=True)
class LevelCoeff:
    """Fitted per-level coefficients (seconds): per step, per byte moved, per byte reduced."""

    latency_per_step: float
    per_byte_moved: float
    per_byte_reduced: float


@dataclass(frozen=True)
class Fit:
    """One op's least-squares fit (seconds): per-level coefficients, per byte copied, launch per task, per call; its error."""

    op: str
    levels: tuple[LevelCoeff, ...]
    per_byte_copied: float
    launch_per_task: float
    per_call: float
    rms_rel_error: float
    max_rel_error: float
    points: int


@dataclass(frozen=True)
class Tuning:
    """A loaded, validated tuning file (see :func:`load_tuning`)."""

    topo: str                       # the topology spec text it was measured on
    nranks: int
    ub_transfer_bytes: int
    points: tuple[Point, ...]
    fits: dict[str, Fit] = field(default_factory=dict)
    mpi: str = ""
    created: str = ""
    path: str = ""
    _curves: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        acc: dict[tuple[str, str], dict[int, list[float]]] = {}
        for p in self.points:
            acc.setdefault((p.op, p.algorithm), {}).setdefault(p.nbytes, []).append(p.time_us * 1e-6)
        for key, by_size in acc.items():
            self._curves[key] = tuple((n, sum(v) / len(v)) for n, v in sorted(by_size.items()))

    def __hash__(self) -> int:
        return hash((self.topo, self.nranks, self.path, len(self.points)))

    def ops(self) -> set[str]:
        """HCCL op names the file has measurements for."""
        return {p.op for p in self.points}

    def algorithms(self, op: str) -> list[str]:
        """Algorithms measured for ``op``, in file order."""
        return list(dict.fromkeys(p.algorithm for p in self.points if p.op == op))

    def curve(self, op: str, algorithm: str) -> tuple[tuple[int, float], ...]:
        """``(nbytes, seconds)`` of ``algorithm``, sorted by size (repeats averaged)."""
        return self._curves.get((op, algorithm), ())

    def measured(self, op: str, algorithm: str, nbytes: int) -> tuple[float, str] | None:
        """Seconds for ``nbytes`` from the measured points, and how: exact or interpolated.

        Log-log interpolation between the two measured sizes around ``nbytes``; None outside
        the measured range (the fit prices those).
        """
        pts = self.curve(op, algorithm)
        if not pts or not pts[0][0] <= nbytes <= pts[-1][0]:
            return None
        i = bisect_left([p[0] for p in pts], nbytes)
        if pts[i][0] == nbytes:
            return pts[i][1], f"measured at {nbytes} B"
        (x0, y0), (x1, y1) = pts[i - 1], pts[i]
        w = (math.log(nbytes) - math.log(x0)) / (math.log(x1) - math.log(x0))
        return math.exp(math.log(y0) + w * (math.log(y1) - math.log(y0))), f"interpolated {x0}..{x1} B"

    def check_machine(self, topo: str, nranks: int, what: str = "this communicator") -> None:
        """Raise :class:`TuningError` unless the file was measured on ``topo`` with ``nranks`` ranks."""
        where = f"tuning file {self.path or '(in memory)'}"
        if nranks != self.nranks:
            raise TuningError(f"{where} was measured on {self.nranks} ranks, {what} has {nranks}; "
                              f"tune on this machine: python -m pyhccl.bench <op> --algo all --tune FILE")
        if topo != self.topo:
            raise TuningError(f"{where} was measured on topology {self.topo!r}, {what} is {topo!r}; "
                              f"tune with the same --topo (or PYHCCL_TOPO)")

    def check_info(self, info: TopoInfo) -> None:
        """Raise :class:`TuningError` unless a rank's TopoInfo matches the file's machine."""
        mine = machine(self.topo).infos[0]
        for what, a, b in (("ranks", mine.user_rank_size, info.user_rank_size),
                           ("servers", mine.server_num, info.server_num),
                           ("super pods", mine.super_pod_num, info.super_pod_num)):
            if a != b:
                raise TuningError(f"tuning file {self.path or '(in memory)'} was measured on {self.topo!r} "
                                  f"({a} {what}); this topology has {b} {what}: tune on this machine with "
                                  f"python -m pyhccl.bench <op> --algo all --tune FILE")

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "version": VERSION, "created": self.created, "mpi": self.mpi,
                "topology": {"spec": self.topo, "nranks": self.nranks}, "ub_transfer_bytes": self.ub_transfer_bytes,
                "fits": {op: _fit_dict(f) for op, f in self.fits.items()},
                "points": [asdict(p) for p in self.points]}

    def save(self, path: str) -> None:
        """Write the file (atomically: a temporary file renamed over ``path``)."""
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)


def _fit_dict(f: Fit) -> dict[str, Any]:
    return {"levels": [asdict(c) for c in f.levels], "per_byte_copied": f.per_byte_copied,
            "launch_per_task": f.launch_per_task, "per_call": f.per_call,
            "rms_rel_error": f.rms_rel_error, "max_rel_error": f.max_rel_error, "points": f.points}


# -- reading -----------------------------------------------------------------------------------
def load_tuning(source: str | os.PathLike | dict) -> Tuning:
    """Read and validate a tuning file (a path, or the parsed JSON object).

    Raises:
        TuningError: unreadable file, invalid JSON, another schema or version, or a field of
            the wrong type or range; the message names the field.
    """
    path = ""
    if isinstance(source, dict):
        data = source
    else:
        path = os.fspath(source)
        try:
            with open(path) as f:
                data = json.load(f, parse_constant=_no_constant)
        except OSError as e:
            raise TuningError(f"cannot read tuning file {path!r}: {e.strerror or e}") from None
        except (ValueError, RecursionError) as e:
            raise TuningError(f"tuning file {path!r} is not valid JSON: {e}") from None
    return _parse(data, path)


_LOADED: dict[str, tuple[float, Tuning]] = {}


def load_tuning_cached(path: str) -> Tuning:
    """:func:`load_tuning`, read again only when the file's modification time changes."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError as e:
        raise TuningError(f"cannot read tuning file {path!r} (PYHCCL_TUNING_FILE / tuning=): "
                          f"{e.strerror or e}") from None
    hit = _LOADED.get(path)
    if hit is None or hit[0] != mtime:
        hit = _LOADED[path] = (mtime, load_tuning(path))
    return hit[1]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _parse(d: Any, path: str) -> Tuning:
    where = f"tuning file {path!r}" if path else "tuning data"

    def fail(fieldname: str, want: str, got: Any) -> TuningError:
        text = repr(got)
        return TuningError(f"{where}: field {fieldname!r}: expecting {want}, got {text[:60]}")

    def get(obj: dict, key: str, prefix: str, want: str, ok) -> Any:
        name = f"{prefix}{key}"
        if key not in obj:
            raise TuningError(f"{where}: missing field {name!r} ({want})")
        v = obj[key]
        if not ok(v):
            raise fail(name, want, v)
        return v

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    def count(lo: int, hi: int = _MAX_BYTES):
        return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi

    if not isinstance(d, dict):
        raise fail("(top level)", "a JSON object", d)
    if d.get("schema") != SCHEMA:
        raise fail("schema", f"{SCHEMA!r}", d.get("schema"))
    if d.get("version") != VERSION:
        raise TuningError(f"{where}: field 'version': this pyhccl reads version {VERSION}, the file has "
                          f"{d.get('version')!r}; re-tune with this pyhccl")
    topo = get(d, "topology", "", "an object {spec, nranks}", lambda v: isinstance(v, dict))
    spec = get(topo, "spec", "topology.", "a topology spec string", lambda v: isinstance(v, str) and 0 < len(v) < 4096)
    nranks = get(topo, "nranks", "topology.", "an int >= 1", count(1, 1 << 20))
    ub = get(d, "ub_transfer_bytes", "", "an int >= 1", count(1))
    raw = get(d, "points", "", "a list", lambda v: isinstance(v, list))
    points = []
    for i, p in enumerate(raw):
        pre = f"points[{i}]."
        if not isinstance(p, dict):
            raise fail(f"points[{i}]", "an object", p)
        op = get(p, "op", pre, f"one of {', '.join(HCCL_OPS)}", lambda v: v in HCCL_OPS)
        algo = get(p, "algorithm", pre, "an algorithm name", lambda v: isinstance(v, str) and 0 < len(v) < 200)
        nbytes = get(p, "nbytes", pre, "an int >= 1", count(1))
        t = get(p, "time_us", pre, "a number > 0", lambda v: number(v) and v > 0)
        dtype = p.get("dtype", "float32")
        if not isinstance(dtype, str) or len(dtype) > 32:
            raise fail(f"{pre}dtype", "a dtype name", dtype)
        size = p.get("size", 0)
        if not count(0)(size):
            raise fail(f"{pre}size", "an int >= 0", size)
        points.append(Point(op, algo, nbytes, float(t), dtype, size))
    fits_raw = d.get("fits", {})
    if not isinstance(fits_raw, dict):
        raise fail("fits", "an object keyed by op", fits_raw)
    fits = {}
    for op, f in fits_raw.items():
        pre = f"fits.{op}."
        if op not in HCCL_OPS:
            raise fail(f"fits.{op}", f"a key among {', '.join(HCCL_OPS)}", op)
        if not isinstance(f, dict):
            raise fail(f"fits.{op}", "an object", f)
        levels = get(f, "levels", pre, f"a list of {LEVELS} objects",
                     lambda v: isinstance(v, list) and len(v) == LEVELS and all(isinstance(x, dict) for x in v))
        coeffs = []
        for j, c in enumerate(levels):
            lp = f"{pre}levels[{j}]."
            vals = [get(c, k, lp, "a number >= 0", lambda v: number(v) and v >= 0)
                    for k in ("latency_per_step", "per_byte_moved", "per_byte_reduced")]
            coeffs.append(LevelCoeff(*map(float, vals)))
        copied, launch, call = (get(f, k, pre, "a number >= 0", lambda v: number(v) and v >= 0)
                                for k in ("per_byte_copied", "launch_per_task", "per_call"))
        rms, mx = (get(f, k, pre, "a number >= 0", lambda v: number(v) and v >= 0)
                   for k in ("rms_rel_error", "max_rel_error"))
        npts = get(f, "points", pre, "an int >= 0", count(0))
        fits[op] = Fit(op, tuple(coeffs), float(copied), float(launch), float(call), float(rms), float(mx), npts)
    mpi, created = d.get("mpi", ""), d.get("created", "")
    if not isinstance(mpi, str) or not isinstance(created, str):
        raise fail("mpi" if not isinstance(mpi, str) else "created", "a string", mpi)
    return Tuning(spec, nranks, ub, tuple(points), fits, mpi, created, path)
