"""Least-squares fit of the measured cost model: per-level coefficients from measured times.

time(algorithm, size) ~ sum over levels of (latency per step x steps + time per byte moved x
bytes moved + time per byte reduced x bytes reduced) + time per byte copied x bytes copied +
launch per task x tasks + a per-call constant. The coefficients are non-negative (Lawson and
Hanson's NNLS) and minimise the relative error, so that 8-byte and 64-MiB points weigh alike.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from ..plan.api import NotRunnableError
from .features import FEATURES, features
from .file import LEVELS, NATIVE, Fit, LevelCoeff, Point

__all__ = ["fit_op", "predict", "nnls"]


def nnls(a: np.ndarray, b: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """min ||a x - b|| subject to x >= 0 (Lawson-Hanson active set)."""
    _, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = a.T @ (b - a @ x)
    for _ in range(3 * n + 10):
        free = ~passive & (w > tol)
        if not free.any():
            break
        passive[np.argmax(np.where(free, w, -np.inf))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > tol).all():
                x = z
                break
            neg = passive & (z <= tol)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > tol
        w = a.T @ (b - a @ x)
    return x


def _coeff_vector(f: Fit) -> np.ndarray:
    c = [lv.latency_per_step for lv in f.levels] + [lv.per_byte_moved for lv in f.levels]
    c += [lv.per_byte_reduced for lv in f.levels]
    return np.array(c + [f.per_byte_copied, f.launch_per_task, f.per_call])


def predict(f: Fit, x: np.ndarray) -> float:
    """Seconds the fit gives for feature vector ``x``."""
    return float(_coeff_vector(f) @ x)


def fit_op(op: str, points: Iterable[Point], topo: str, ub_bytes: int, itemsize: int = 4) -> Fit | None:
    """The fit for one op's points (native MPI's are left out: its plan is not ours); None without points."""
    rows, ys = [], []
    for p in points:
        if p.op != op or p.algorithm == NATIVE:
            continue
        try:
            rows.append(features(op, p.algorithm, topo, p.nbytes, itemsize, ub_bytes))
        except (NotRunnableError, ValueError):
            continue
        ys.append(p.time_us * 1e-6)
    if not rows:
        return None
    x, y = np.array(rows), np.array(ys)
    a = x / y[:, None]                                   # relative error: divide each row by its time
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    c = nnls(a / scale, np.ones(len(y))) / scale
    rel = (x @ c - y) / y
    k = LEVELS
    levels = tuple(LevelCoeff(float(c[i]), float(c[k + i]), float(c[2 * k + i])) for i in range(k))
    return Fit(op, levels, float(c[3 * k]), float(c[3 * k + 1]), float(c[3 * k + 2]),
               float(math.sqrt(np.mean(rel ** 2))), float(np.max(np.abs(rel))), len(y))


assert len(FEATURES) == 3 * LEVELS + 3
