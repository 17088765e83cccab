"""Byte sizes as nccl-tests writes them: ``8``, ``4K``, ``64M``, ``1G`` (binary units)."""

from __future__ import annotations

__all__ = ["parse_size", "format_size"]

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``8``, ``4K``, ``64M``, ``1G`` (a trailing ``B`` allowed) to bytes.

    Raises:
        ValueError: not a non-negative size.
    """
    t = str(text).strip().upper().removesuffix("B")
    mult = _UNITS.get(t[-1:], 1)
    num = t[:-1] if t[-1:] in _UNITS else t
    try:
        value = int(float(num) * mult)
    except ValueError:
        raise ValueError(f"expecting a size like 8, 4K, 64M or 1G, got {text!r}") from None
    if value < 0:
        raise ValueError(f"expecting a non-negative size, got {text!r}")
    return value


def format_size(nbytes: int) -> str:
    """The shortest exact form: ``8``, ``4K``, ``64M``."""
    for unit, mult in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult}{unit}"
    return str(nbytes)
