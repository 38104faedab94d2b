"""Text and plots for ``simcluster reliability``: goodput, lost time, interruptions, interval sweep.

Pure functions of the result dicts (``ReliabilityResult.to_dict``, ``SweepResult.to_dict``);
matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simcluster.report.table import format_table


def _minutes(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} min"


def _step(d: dict[str, Any]) -> str:
    step = d.get("step_time_s")
    return "-" if step is None else f"{step:.4g} s ({d['step_engine']} engine)"


def _blocking(d: dict[str, Any]) -> str:
    """``, blocks 0.12 s`` (the snapshot, or the whole write when synchronous)."""
    blocking = d.get("checkpoint_blocking_s")
    return "" if blocking is None else f", blocks {blocking:.3g} s"


def _spread(values: dict[str, float], fmt: str) -> str:
    """``p5 a, p50 b, p95 c, p99 d`` of the percentiles present."""
    return ", ".join(f"{k} {fmt.format(values[k])}" for k in ("p5", "p50", "p95", "p99")
                     if k in values)


def summary_text(name: str, d: dict[str, Any]) -> str:
    """Headline numbers, interruptions by class and the lost-time breakdown."""
    n = d["interruptions"]
    ttt = d["time_to_train_days"]
    head = [
        f"scenario        {name} ({d['replicas']} replicas, {d['loop']} loop)",
        f"step time       {_step(d)}",
        f"goodput         {d['goodput']:.2%} +- {d['goodput_ci95']:.2%} (95% CI)   "
        f"effective training time {d['effective_training_time_ratio']:.2%}",
        f"elapsed         {d['elapsed_days']:.2f} days (mean), useful {d['useful_days']:.2f} days",
        f"interruptions   {n['total']:.1f} ({n['unexpected']:.1f} unexpected, "
        f"{n['by_class'].get('planned', 0.0):.1f} planned)",
        f"checkpoint      every {_minutes(d['checkpoint_interval_min'])}, "
        f"{d['checkpoint_size_tb']:.3g} TB{_blocking(d)}; Young {_minutes(d['young_interval_min'])}, "
        f"Daly {_minutes(d['daly_interval_min'])}",
    ]
    if d.get("straggler_slowdown") is not None:
        head.append(f"stragglers      each episode slows the step x{d['straggler_slowdown']:.4g}")
    if ttt is not None:
        head.append("time to train   " + _spread(ttt, "{:.2f}") + " days")
    if d.get("goodput_percentiles"):
        head.append("goodput spread  " + _spread(d["goodput_percentiles"], "{:.2%}"))
    lost = d["lost_time_breakdown_h"]
    total = d["lost_time_total_h"]
    rows = [[k, f"{v:.2f}", f"{v / total:.1%}" if total > 0 else "-"] for k, v in lost.items()]
    rows.append(["total (elapsed - useful)", f"{total:.2f}", "100.0%" if total > 0 else "-"])
    classes = [[k, f"{v:.2f}"] for k, v in n["by_class"].items()]
    return "\n".join([*head, "", format_table(["lost time", "hours", "share"], rows), "",
                      format_table(["interruptions", "mean count"], classes)])


def sweep_text(s: dict[str, Any]) -> str:
    """The interval sweep table with the simulated optimum beside Young's and Daly's."""
    rows = [[f"{p['interval_min']:.1f}", f"{p['goodput']:.4f}", f"{p['ci95']:.4f}",
             f"{p['daly_goodput']:.4f}",
             "-" if p["time_to_train_days"] is None else f"{p['time_to_train_days']:.2f}"]
            for p in s["interval_sweep"]]
    table = format_table(["interval (min)", "goodput", "95% CI", "Daly Eq. 9", "days to train"], rows)
    optima = (f"optimum: simulated {_minutes(s['optimal_interval_min'])}, "
              f"Young {_minutes(s['young_interval_min'])}, Daly {_minutes(s['daly_interval_min'])} "
              f"({s['sweep_replicas']} replicas per interval, common random numbers)")
    return "\n".join([table, optima])


def optimum_text(s: dict[str, Any]) -> str:
    """The golden-section search: its evaluations, the simulated optimum, Young's and Daly's."""
    rows = [[f"{p['interval_min']:.2f}", f"{p['goodput']:.4f}", f"{p['ci95']:.4f}",
             f"{p['daly_goodput']:.4f}"]
            for p in sorted(s["interval_search"], key=lambda p: float(p["interval_min"]))]
    table = format_table(["interval (min)", "goodput", "95% CI", "Daly Eq. 9"], rows)
    low, high = s["search_bracket_min"]
    lo, hi = s["optimal_interval_ci95_min"]
    optima = (f"optimum: simulated {_minutes(s['optimal_interval_min'])} (goodput "
              f"{s['optimal_goodput']:.4f}; {lo:.2f}..{hi:.2f} min within its 95% CI), "
              f"Young {_minutes(s['young_interval_min'])}, Daly "
              f"{_minutes(s['daly_interval_min'])}; golden-section search on {low:.2f}..{high:.2f} "
              f"min, {s['evaluations']} evaluations of {s['sweep_replicas']} replicas (common "
              f"random numbers)")
    return "\n".join([table, optima])


def plot_goodput_interval(sweep: dict[str, Any], path: str | Path, title: str = "") -> None:
    """Goodput against the checkpoint interval: simulated mean with its 95% band, Daly's closed
    form, and the simulated, Young and Daly optima as vertical lines. Needs matplotlib."""
    matplotlib: Any = importlib.import_module("matplotlib")  # optional dependency, imported lazily
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")

    points: Sequence[dict[str, Any]] = sweep["interval_sweep"]
    x = [p["interval_min"] for p in points]
    y = [p["goodput"] for p in points]
    ci = [p["ci95"] for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.fill_between(x, [a - b for a, b in zip(y, ci, strict=True)],
                    [a + b for a, b in zip(y, ci, strict=True)], alpha=0.3, label="simulated 95% CI")
    ax.plot(x, y, "o-", label="simulated mean")
    ax.plot(x, [p["daly_goodput"] for p in points], "--", label="Daly Eq. 9 (closed form)")
    for key, style, label in (("optimal_interval_min", "-", "simulated optimum"),
                              ("young_interval_min", ":", "Young"), ("daly_interval_min", "-.", "Daly")):
        if sweep[key] is not None:
            ax.axvline(sweep[key], linestyle=style, color="grey", label=f"{label} {sweep[key]:.1f} min")
    ax.set_xlabel("checkpoint interval (min)")
    ax.set_ylabel("goodput (useful / elapsed)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
