"""Human-readable summary of a run for ``simcluster run`` (``--json`` prints the dict instead)."""

from __future__ import annotations

from typing import Any

from simcluster.report.table import format_table
from simcluster.report.validation import validation_text


def run_text(d: dict[str, Any]) -> str:
    """The headline numbers, the time breakdown and the memory of the most loaded stage."""
    t = d["iteration_time_s"]
    head = [
        f"scenario        {d['scenario']} ({d['engine']}, {d['gpus']} GPUs)",
        f"iteration       {t:.4g} s   {d['tokens_per_s']:,.0f} tokens/s",
        f"model FLOPs     {d['model_tflops_per_gpu']:.1f} TFLOP/s per GPU   MFU {d['mfu']:.1%}",
        f"hardware FLOPs  {d['hardware_tflops_per_gpu']:.1f} TFLOP/s per GPU   HFU {d['hfu']:.1%}",
        _memory_line(d),
        f"bubble          {d['bubble_fraction']:.1%} of the step",
        f"DP reduction    {d['dp_comm_total_s']:.4g} s, of which {d['dp_comm_hidden_s']:.4g} s hidden",
    ]
    if "validation" in d:
        head.append("validation      " + validation_text(d["validation"]))
    if not d["fits_in_memory"]:
        head.insert(1, _does_not_fit_line(d))
    slowed = {k: f for k, f in d.get("contention", {}).items() if f > 1.0}
    if slowed:
        head.append("contention      " + ", ".join(f"{k} x{f:.2f}" for k, f in slowed.items())
                    + " (Tier B: traffic sharing links)")
    if d["time_to_train_days"] is not None:
        head.append(f"time to train   {_big(d['time_to_train_days'], '{:.2f}')} days   "
                    f"{_big(d['gpu_hours'], '{:,.0f}')} GPU-hours{_cost_text(d)}")
    if d["goodput"] is not None:
        head.append(f"with failures   goodput {d['goodput']:.1%}, expected "
                    f"{d['expected_time_to_train_days']:.2f} days to train "
                    f"(see 'simcluster reliability' for the breakdown and interval sweep)")
    rows = [[k, v, v / t if t else 0.0] for k, v in d["time_breakdown_s"].items()]
    rows.append(["total", sum(d["time_breakdown_s"].values()), 1.0])
    table = format_table(["time breakdown", "seconds", "share"],
                         [[k, f"{v:.4g}", f"{share:.1%}"] for k, v, share in rows])
    return "\n".join([*head, "", table])


def _big(value: float, fmt: str) -> str:
    """``fmt`` of ``value``, or ``1.23e+45`` above a trillion (a 300-digit day count says
    nothing more)."""
    return f"{value:.3g}" if abs(value) >= 1e12 else fmt.format(value)


def _cost_text(d: dict[str, Any]) -> str:
    """The cost after the GPU-hours: renting, the rent (the cash the run needs); buying, the cash
    (capital up front plus electricity) beside the amortised cost charged to the run."""
    if d["cost_usd"] is None:
        return ""
    def money(key: str) -> str:
        return "$" + _big(d[key], "{:,.0f}")

    if d.get("capital_usd") is None:
        return f"   {money('cost_usd')} rent (the cash this run needs)"
    unpriced = d.get("network_unpriced") or []
    gear = f", of which network {money('network_usd')}" if d.get("network_usd") else ""
    gear += f", {' and '.join(unpriced)} not priced" if unpriced else ""
    energy = f"; + energy {money('energy_usd')}" if d.get("energy_usd") else ""
    return (f"   cash {money('cash_usd')} (capital {money('capital_usd')} up front{gear}{energy}); "
            f"amortised {money('cost_usd')}")


def _does_not_fit_line(d: dict[str, Any]) -> str:
    """The warning of a layout whose most loaded stage exceeds the GPU memory (or whose
    offloaded state exceeds the host's)."""
    if d["memory_gib"].get("host_refusal") and d["peak_memory_gib"] <= d["memory_capacity_gib"]:
        return f"DOES NOT FIT: {d['memory_gib']['host_refusal']}; the times below assume it ran"
    return (f"DOES NOT FIT: needs {d['peak_memory_gib']:.1f} GiB per GPU on stage "
            f"{d['memory_gib']['stage']}, {d['memory_capacity_gib']:.1f} GiB available; the times "
            "below assume it ran (reduce activations: recompute, more pp/tp/cp)")


def _memory_line(d: dict[str, Any]) -> str:
    mem = d["memory_gib"]
    verdict = "fits" if d["fits_in_memory"] else "DOES NOT FIT"
    parts = ", ".join(f"{k} {mem[k]:.1f}" for k in
                      ("weights", "grads", "optimizer", "activations", "overhead"))
    host = ""
    if "host_per_node" in mem:  # parallelism.offload
        cap = mem["host_capacity_per_node"]
        host = (f"; offloaded {mem['host_per_node']:.1f} GiB per node in host memory"
                + (f" of {cap:.0f}" if cap is not None else ""))
    return (f"memory          {d['peak_memory_gib']:.1f} of {d['memory_capacity_gib']:.0f} GiB "
            f"per GPU: {verdict} (stage {mem['stage']}: {parts}; {mem['dominant']} dominate)"
            + host)
