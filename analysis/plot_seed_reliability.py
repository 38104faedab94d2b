"""Figures: the seeds' reliability questions on 1,000-GPU jobs.

1. ``seed-uninterrupted.png``: the probability that 125 DGX H100 (1,000 GPUs) run 8 hours, a day
   and three weeks without an interruption, ``(1 - p)^n`` with ``p = 1 - exp(-rate T)`` per node
   (``scenarios/seed-1000gpu-uninterrupted.yaml``), against the horizon engine's share of replicas
   with no interruption over the same wall-clock horizon.
2. ``seed-checkpoint-modes.png``: goodput of sync, async and in-memory (flash) checkpoints
   (``scenarios/seed-checkpoint-modes.yaml``).
3. ``seed-spares-elastic.png``: goodput by hot spares, elastic restart and watchdog timeout
   (``scenarios/seed-spares-elastic.yaml``).

Each figure gets a CSV beside it. Needs matplotlib (``pip install simcluster[plots]``).
Usage: ``python analysis/plot_seed_reliability.py [--out-dir DIR] [--replicas N]``.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _guard import guarded

import simcluster
from simcluster.horizon import simulate_reliability
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
#: The seed's horizons: 8 hours ("the algorithm team sleeps"), a day, three weeks.
HORIZONS_H = (8.0, 24.0, 21 * 24.0)


def p_node_failure(rate_per_node_day: float, hours: float) -> float:
    """Probability that one node fails within ``hours`` (exponential failures)."""
    return 1.0 - math.exp(-rate_per_node_day * hours / 24.0)


def p_uninterrupted(p_node: float, nodes: int) -> float:
    """Probability that none of ``nodes`` independent nodes fails: ``(1 - p)^n``."""
    return (1.0 - p_node) ** nodes


def simulated_uninterrupted(hours: float, replicas: int) -> tuple[float, float]:
    """Share of horizon-engine replicas with no interruption in ``hours`` of wall-clock time, and
    their mean number of interruptions."""
    s = load_scenario(SCENARIOS / "seed-1000gpu-uninterrupted.yaml",
                      [f"reliability.horizon_days={hours / 24.0!r}"])
    counts = [sum(r.interruptions) for r in simulate_reliability(s, replicas).records]
    return sum(1 for c in counts if c == 0) / len(counts), sum(counts) / len(counts)


def uninterrupted_rows(replicas: int) -> list[dict[str, float]]:
    """Closed form and simulation for each of the seed's horizons."""
    s = load_scenario(SCENARIOS / "seed-1000gpu-uninterrupted.yaml")
    assert s.reliability is not None
    rate, nodes = s.reliability.failure_rate_per_node_day, s.cluster.nodes
    rows = []
    for hours in HORIZONS_H:
        p = p_node_failure(rate, hours)
        share, mean = simulated_uninterrupted(hours, replicas)
        rows.append({"hours": hours, "p_node": p, "closed_form": p_uninterrupted(p, nodes),
                     "simulated": share, "expected_interruptions": nodes * rate * hours / 24.0,
                     "simulated_interruptions": mean, "replicas": replicas})
    return rows


def goodput_rows(scenario: str, replicas: int, columns: Sequence[str]) -> list[dict[str, Any]]:
    """The sweep section of ``scenario`` with its goodput pass: one row per setting."""
    df = simcluster.sweep(str(SCENARIOS / scenario), jobs=1, out=None, replicas=replicas)
    keep = [*columns, "goodput", "checkpoint_interval_min", "goodput_time_to_train_days"]
    return [{c: r[c] for c in keep} for _, r in df.iterrows()]


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """``rows`` as a CSV with the first row's keys as header."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _pyplot() -> Any:
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def plot_uninterrupted(rows: Sequence[dict[str, float]], png: Path) -> None:
    """Closed-form curve over 1 h .. 3 weeks, the three horizons simulated as points."""
    plt = _pyplot()
    s = load_scenario(SCENARIOS / "seed-1000gpu-uninterrupted.yaml")
    assert s.reliability is not None
    rate, nodes = s.reliability.failure_rate_per_node_day, s.cluster.nodes
    hours = [10 ** (k / 50) for k in range(136)]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(hours, [p_uninterrupted(p_node_failure(rate, h), nodes) for h in hours],
            label=f"(1 - p)^{nodes}, {rate:g} failures per node-day")
    ax.plot([r["hours"] for r in rows], [r["simulated"] for r in rows], "o",
            label=f"horizon engine ({int(rows[0]['replicas'])} replicas)")
    for r in rows:
        ax.annotate(f"{r['closed_form']:.3g}", (r["hours"], r["closed_form"]), textcoords="offset points",
                    xytext=(6, 6), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-5, 1.5)
    ax.set_xlabel("hours of wall-clock time")
    ax.set_ylabel("P(no interruption)")
    ax.set_title(f"{nodes * 8} GPUs ({nodes} DGX H100): running without an interruption")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def plot_goodput(rows: Sequence[dict[str, Any]], label_of: Any, png: Path, title: str) -> None:
    """Horizontal bars of goodput, one per setting, best on top."""
    plt = _pyplot()
    rows = sorted(rows, key=lambda r: r["goodput"])
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    ax.barh([label_of(r) for r in rows], [100 * r["goodput"] for r in rows])
    for y, r in enumerate(rows):
        ax.annotate(f"{100 * r['goodput']:.2f}%", (100 * r["goodput"], y), va="center", fontsize=8,
                    xytext=(3, 0), textcoords="offset points")
    low = min(100 * r["goodput"] for r in rows)
    ax.set_xlim(max(0.0, low - 2), 100.5)
    ax.set_xlabel("goodput, %")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def _spares_label(r: dict[str, Any]) -> str:
    return (f"spares {r['reliability.spares']}, elastic {'on' if r['reliability.elastic'] else 'off'}, "
            f"watchdog {int(r['reliability.watchdog_timeout_s'])} s")


def main(argv: Sequence[str]) -> int:
    """Draw the three figures into ``--out-dir``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir", default=str(ROOT / "docs" / "img"))
    parser.add_argument("--replicas", type=int, default=2000, help="replicas of the cross-check")
    parser.add_argument("--goodput-replicas", type=int, default=50, help="replicas of the goodput sweeps")
    args = parser.parse_args(argv[1:])
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = uninterrupted_rows(args.replicas)
    write_csv(rows, out / "seed-uninterrupted.csv")
    plot_uninterrupted(rows, out / "seed-uninterrupted.png")
    for r in rows:
        print(f"{r['hours']:>5.0f} h  P(no interruption) closed form {r['closed_form']:.4g}, simulated "
              f"{r['simulated']:.4g}; interruptions expected {r['expected_interruptions']:.3g}, simulated "
              f"{r['simulated_interruptions']:.3g}")
    modes = goodput_rows("seed-checkpoint-modes.yaml", args.goodput_replicas, ["option"])
    write_csv(modes, out / "seed-checkpoint-modes.csv")
    plot_goodput(modes, lambda r: r["option"], out / "seed-checkpoint-modes.png",
                 "Llama 3 70B, 1,024 H100: checkpoint modes")
    spares = goodput_rows("seed-spares-elastic.yaml", args.goodput_replicas,
                          ["reliability.spares", "reliability.elastic", "reliability.watchdog_timeout_s"])
    write_csv(spares, out / "seed-spares-elastic.csv")
    plot_goodput(spares, _spares_label, out / "seed-spares-elastic.png",
                 "Llama 3 8B, 1,000 H100: spares, elastic restart, hang detection")
    for name in ("uninterrupted", "checkpoint-modes", "spares-elastic"):
        print(f"wrote {out / f'seed-{name}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_seed_reliability.py", main, sys.argv))
