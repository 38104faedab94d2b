"""Reports of ``simcluster collective``: nccl-tests-style rows, table, text, JSON and a busbw plot.

A row follows nccl-tests ``all_reduce_perf`` (NVIDIA/nccl-tests @a0b82b2 ``doc/PERFORMANCE.md``):
size in bytes, count of float32 elements, time in microseconds, algorithm and bus bandwidth in
GB/s (decimal, 1e9 bytes/s, as nccl-tests prints). matplotlib is imported only by
:func:`plot_busbw` (plots stay outside the core: ``pip install 'simcluster[plots]'``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from simcluster.errors import SpecError
from simcluster.perf.collectives import CollectiveTime
from simcluster.report.table import format_table
from simcluster.units import format_bytes

#: nccl-tests' default data type is float (4 bytes).
ELEMENT_BYTES = 4
GB = 1e9


@dataclass(frozen=True, slots=True)
class CollectiveRow:
    """One size of a sweep, in nccl-tests units.

    Attributes
    ----------
    size_bytes : float
        nccl-tests ``size``.
    count : int
        float32 elements (``size // 4``).
    time_us : float
        Duration, microseconds.
    algbw_GBps, busbw_GBps : float
        nccl-tests algorithm and bus bandwidth, GB/s (1e9 B/s).
    algorithm, protocol : str
        What the tier chose.
    """

    size_bytes: float
    count: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str
    protocol: str


def row(size_bytes: float, result: CollectiveTime) -> CollectiveRow:
    """The report row of one result."""
    return CollectiveRow(size_bytes, int(size_bytes) // ELEMENT_BYTES, result.time_s * 1e6,
                         result.algbw_Bps / GB, result.busbw_Bps / GB, result.algorithm,
                         result.protocol)


def sweep_table(rows: Sequence[CollectiveRow]) -> str:
    """The nccl-tests-style table: size, count, time, algbw, busbw, algorithm."""
    body = [[f"{r.size_bytes:.0f}", r.count, f"{r.time_us:.1f}", f"{r.algbw_GBps:.2f}",
             f"{r.busbw_GBps:.2f}", f"{r.algorithm}/{r.protocol}"] for r in rows]
    return format_table(["size (B)", "count", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algo"],
                        body)


def single_text(title: str, r: CollectiveRow) -> str:
    """A few labelled lines for one size."""
    lines = [title,
             f"size       {format_bytes(r.size_bytes)} ({r.size_bytes:.0f} B)",
             f"time       {r.time_us:.1f} us",
             f"algbw      {r.algbw_GBps:.2f} GB/s",
             f"busbw      {r.busbw_GBps:.2f} GB/s",
             f"algorithm  {r.algorithm} ({r.protocol})"]
    return "\n".join(lines)


def as_json(header: Mapping[str, Any], rows: Sequence[CollectiveRow]) -> dict[str, Any]:
    """One JSON-able object: the header fields and ``rows``."""
    return {**header, "rows": [asdict(r) for r in rows]}


def plot_busbw(rows: Sequence[CollectiveRow], path: str, title: str) -> None:
    """Write a PNG of bus bandwidth against size (log2 x axis) to ``path``.

    Raises
    ------
    SpecError
        ``--plot`` when matplotlib is not installed or the file cannot be written.
    """
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        raise SpecError("--plot", "needs matplotlib: pip install 'simcluster[plots]'") from None
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r.size_bytes for r in rows], [r.busbw_GBps for r in rows], marker="o")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="size (bytes)", ylabel="busbw (GB/s)", title=title)
    ax.grid(True, alpha=0.3)
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as err:
        raise SpecError("--plot", f"cannot write {path}: {err.strerror}") from None
    finally:
        plt.close(fig)
