"""Unit suffixes of YAML keys and their conversion to SI, done once at load time.

A key carries its unit (``bandwidth_GBps``, ``nic_Gbps``, ``latency_us``, ``memory_GiB``); inside the
code every quantity is SI with a suffix naming it (``_Bps`` bytes per second, ``_s`` seconds,
``_bytes``, ``_flops_per_s``, ``_W``, ``_usd``). Decimal and binary prefixes are always explicit:
``GB`` is 1e9 bytes, ``GiB`` is 2**30 bytes, ``TFLOPS`` is 1e12 FLOP/s (never 2**40).
"""

from __future__ import annotations

import re
from typing import Final

KB: Final = 1e3
MB: Final = 1e6
GB: Final = 1e9
TB: Final = 1e12
KiB: Final = 2.0**10
MiB: Final = 2.0**20
GiB: Final = 2.0**30
TiB: Final = 2.0**40

#: YAML key suffix -> (SI suffix of the attribute, factor to SI).
SUFFIXES: Final[dict[str, tuple[str, float]]] = {
    "Bps": ("Bps", 1.0),
    "GBps": ("Bps", GB),
    "TBps": ("Bps", TB),
    "MBps": ("Bps", MB),
    "Gbps": ("Bps", GB / 8),
    "us": ("s", 1e-6),
    "ms": ("s", 1e-3),
    "s": ("s", 1.0),
    "min": ("s", 60.0),
    "h": ("s", 3600.0),
    "days": ("s", 86400.0),
    "bytes": ("bytes", 1.0),
    "GiB": ("bytes", GiB),
    "GB": ("bytes", GB),
    "TB": ("bytes", TB),
    "TFLOPS": ("flops_per_s", 1e12),
    "FLOPS": ("flops_per_s", 1.0),
    "W": ("W", 1.0),
    "usd": ("usd", 1.0),
}

_SIZE_RE: Final = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([KMGT]i?B?|B)?\s*$")
_SIZE_FACTORS: Final[dict[str, float]] = {
    "": 1.0, "B": 1.0,
    "K": KiB, "KB": KB, "KiB": KiB,
    "M": MiB, "MB": MB, "MiB": MiB,
    "G": GiB, "GB": GB, "GiB": GiB,
    "T": TiB, "TB": TB, "TiB": TiB,
}


def split_suffix(key: str) -> tuple[str, str] | None:
    """``'bandwidth_GBps'`` -> ``('bandwidth', 'GBps')``; ``None`` when the key has no unit suffix."""
    stem, sep, suffix = key.rpartition("_")
    if not sep or suffix not in SUFFIXES:
        return None
    return stem, suffix


def dimension(suffix: str) -> str:
    """The SI suffix a unit converts to (``'GBps' -> 'Bps'``)."""
    return SUFFIXES[suffix][0]


def same_dimension(suffix: str) -> list[str]:
    """Every accepted key suffix with the dimension of ``suffix`` (``'us'`` -> ``['us', 'ms', ...]``)."""
    dim = dimension(suffix)
    return [s for s, (d, _) in SUFFIXES.items() if d == dim]


def to_si(value: float, suffix: str) -> float:
    """Convert ``value`` given in the unit ``suffix`` (a key of :data:`SUFFIXES`) to SI."""
    return value * SUFFIXES[suffix][1]


def from_si(value: float, suffix: str) -> float:
    """Inverse of :func:`to_si`."""
    return value / SUFFIXES[suffix][1]


def parse_size(text: str) -> float:
    """Parse a message size such as ``'1K'``, ``'8G'``, ``'512MiB'`` or ``'1e6'`` into bytes.

    Bare ``K``/``M``/``G``/``T`` are binary (as in nccl-tests ``-b 1K -e 8G``); ``KB``/``MB``/... are
    decimal; ``KiB``/``MiB``/... are binary. Raises ``ValueError`` on anything else.
    """
    match = _SIZE_RE.match(text)
    if match is None or (match.group(2) not in _SIZE_FACTORS and match.group(2) is not None):
        raise ValueError(f"not a size: {text!r} (expected e.g. 1K, 64MiB, 8G, 1e9)")
    return float(match.group(1)) * _SIZE_FACTORS[match.group(2) or ""]


def format_bytes(n: float) -> str:
    """Human-readable binary size: ``1073741824 -> '1 GiB'``."""
    for unit, factor in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= factor:
            return f"{n / factor:.4g} {unit}"
    return f"{n:.4g} B"
