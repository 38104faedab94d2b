"""``simcluster report``'s page for one scenario run, and the HTML building blocks of both pages.

The page is one self-contained file: CSS inline, figures inline SVG (:mod:`simcluster.report.svg`)
or base64 PNG (the matplotlib Gantt and goodput figures), no script, no external reference. Every
string that comes from the user (scenario name, YAML, keys, sweep cells) goes through
:func:`html.escape`. Headline numbers carry their exact value in ``data-key``/``data-value``
attributes (``repr`` of the float of ``run --json``), so a test or a scraper can read them back
without parsing the rounded text. Pure functions of the result dict, trace events and text the
caller (``simcluster/cli_report.py``) computes; writing the file is :func:`write_page`.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from simcluster.errors import SpecError
from simcluster.observe.tracer import write_text_atomic
from simcluster.report import svg

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1em; }
td, th { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
td:first-child, th:first-child, td.t { text-align: left; }
th { background: #f2f2f2; } .sub td:first-child { padding-left: 2em; color: #555; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 1em; overflow-x: auto; }
.bad { color: #b00; font-weight: bold; } .good { color: #070; font-weight: bold; }
img.figure { max-width: 100%; } .note { color: #555; font-size: .9em; }
"""
PAGE_NAME = "index.html"
MEMORY_PARTS = ("weights", "grads", "optimizer", "activations", "overhead")


def page(title: str, sections: Sequence[str]) -> str:
    """The whole document: ``title`` (escaped here) and the already-built ``sections``."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1>\n" + "\n".join(sections) + "\n</body></html>\n")


def section(ident: str, heading: str, *parts: str) -> str:
    """A ``<section id=...>`` with an ``<h2>`` heading and the built ``parts``."""
    return (f'<section id="{escape(ident)}"><h2>{escape(heading)}</h2>' + "".join(parts)
            + "</section>")


def note(text: str) -> str:
    """A paragraph of explanatory text (escaped)."""
    return f'<p class="note">{escape(text)}</p>'


def cell(value: object) -> str:
    """A table cell: floats to 4 significant digits, ``None`` as a dash, all escaped."""
    if value is None:
        return "<td>-</td>"
    if isinstance(value, float):
        return f"<td>{value:.4g}</td>"
    return f'<td class="t">{escape(str(value))}</td>'


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], sub: Sequence[int] = ()
          ) -> str:
    """A table of ``rows`` (cells through :func:`cell`); rows whose index is in ``sub`` are
    indented (the parts of the row above)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(('<tr class="sub">' if i in sub else "<tr>") + "".join(cell(v) for v in row)
                   + "</tr>" for i, row in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def value_row(label: str, key: str, value: float | None, text: str) -> str:
    """A summary row whose value cell carries the exact number (``data-value``, Python ``repr``)."""
    exact = "" if value is None else f' data-value="{escape(repr(value))}"'
    return (f"<tr><td>{escape(label)}</td><td data-key=\"{escape(key)}\"{exact}>"
            f"{escape(text)}</td></tr>")


def png(path: Path, alt: str) -> str:
    """The PNG at ``path`` as an ``<img>`` with a base64 ``data:`` URI (nothing external)."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img class="figure" alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def drawn_png(draw: Callable[[Path], object], alt: str) -> str:
    """Call ``draw(path)`` to write a PNG in a temporary directory; return it embedded."""
    with tempfile.TemporaryDirectory(prefix="simcluster-report-") as tmp:
        path = Path(tmp) / "figure.png"
        draw(path)
        return png(path, alt)


def write_page(text: str, out_dir: str | Path) -> Path:
    """Write ``text`` to ``out_dir/index.html`` (directory created, file replaced atomically)."""
    target = Path(out_dir) / PAGE_NAME
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        return write_text_atomic(target, text)
    except OSError as err:
        raise SpecError("-o", f"cannot write {target}: {err.strerror}") from None


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.0f}"


def summary(d: Mapping[str, Any]) -> str:
    """The headline numbers of a run (``run --json``'s dict ``d``) as a two-column table."""
    fits = d["fits_in_memory"]
    verdict = (f'<p class="{"good" if fits else "bad"}">'
               + escape(f"memory: {'fits' if fits else 'DOES NOT FIT'} "
                        f"({d['peak_memory_gib']:.1f} of {d['memory_capacity_gib']:.1f} GiB per GPU)")
               + "</p>")
    ttt = d["time_to_train_days"]
    rows = [
        value_row("engine, GPUs", "gpus", float(d["gpus"]), f"{d['engine']}, {d['gpus']} GPUs"),
        value_row("step time", "iteration_time_s", d["iteration_time_s"],
                  f"{d['iteration_time_s']:.4g} s"),
        value_row("tokens/s", "tokens_per_s", d["tokens_per_s"], f"{d['tokens_per_s']:,.0f}"),
        value_row("MFU", "mfu", d["mfu"], f"{d['mfu']:.1%}"),
        value_row("HFU", "hfu", d["hfu"], f"{d['hfu']:.1%}"),
        value_row("model TFLOP/s per GPU", "model_tflops_per_gpu", d["model_tflops_per_gpu"],
                  f"{d['model_tflops_per_gpu']:.1f}"),
        value_row("peak memory per GPU (GiB)", "peak_memory_gib", d["peak_memory_gib"],
                  f"{d['peak_memory_gib']:.2f} of {d['memory_capacity_gib']:.1f}"),
        value_row("pipeline bubble", "bubble_fraction", d["bubble_fraction"],
                  f"{d['bubble_fraction']:.1%}"),
        value_row("time to train", "time_to_train_days", ttt,
                  "-" if ttt is None else f"{ttt:.2f} days"),
        value_row("GPU-hours", "gpu_hours", d["gpu_hours"],
                  "-" if d["gpu_hours"] is None else f"{d['gpu_hours']:,.0f}"),
        value_row("cost to train (amortised when buying)", "cost_usd", d["cost_usd"],
                  _money(d["cost_usd"])),
        value_row("cash the run needs", "cash_usd", d.get("cash_usd"), _money(d.get("cash_usd"))),
        value_row("capital (buying)", "capital_usd", d.get("capital_usd"), _money(d.get("capital_usd"))),
        value_row("of which network", "network_usd", d.get("network_usd"),
                  _money(d.get("network_usd"))),
    ]
    if d.get("goodput") is not None:
        rows += [value_row("goodput (failures, checkpoints)", "goodput", d["goodput"],
                           f"{d['goodput']:.1%}"),
                 value_row("expected time to train", "expected_time_to_train_days",
                           d["expected_time_to_train_days"],
                           f"{d['expected_time_to_train_days']:.2f} days")]
    return section("summary", "Summary", verdict, "<table><tbody>" + "".join(rows)
                   + "</tbody></table>")


def breakdown(d: Mapping[str, Any]) -> str:
    """The step's time by category: a table (seconds, share) and a stacked bar."""
    parts: dict[str, float] = d["time_breakdown_s"]
    total = sum(parts.values())
    rows: list[list[object]] = [[k, v, f"{v / total:.1%}" if total else "-"] for k, v in parts.items()]
    rows.append(["total", total, "100.0%" if total else "-"])
    return section("breakdown", "Time breakdown of a step",
                   table(["category", "seconds", "share"], rows),
                   svg.stacked_bar(parts, "s", "time breakdown of a step"))


def memory(d: Mapping[str, Any]) -> str:
    """Memory per GPU of the most loaded stage by category, the overhead split into its parts."""
    mem: dict[str, Any] = d["memory_gib"]
    overhead: dict[str, float] = mem["overhead_parts"]
    rows: list[list[object]] = []
    sub: list[int] = []
    for key in MEMORY_PARTS:
        rows.append([key, mem[key]])
        if key == "overhead":
            sub += range(len(rows), len(rows) + len(overhead))
            rows += [[name, value] for name, value in overhead.items()]
    rows.append(["total (peak)", d["peak_memory_gib"]])
    rows.append(["capacity", d["memory_capacity_gib"]])
    bar = {**{k: mem[k] for k in MEMORY_PARTS[:-1]},
           **{f"overhead: {k}": v for k, v in overhead.items()}}
    return section("memory", f"Memory per GPU (stage {mem['stage']}, {mem['dominant']} dominate)",
                   table(["category", "GiB"], rows, sub),
                   svg.stacked_bar(bar, "GiB", "memory per GPU by category"))


def gantt_figure(events: Sequence[dict[str, Any]], title: str) -> str:
    """The pipeline Gantt of the simulated step (``report.gantt``, from the Chrome trace events)."""
    from simcluster.report.gantt import gantt

    return section("gantt", "Pipeline schedule of one step (discrete-event simulation)",
                   drawn_png(lambda p: gantt(events, p, title=title), "pipeline Gantt chart"))


def goodput_figure(sweep: Mapping[str, Any], title: str) -> str:
    """Goodput against the checkpoint interval (``report.reliability``) and its table."""
    from simcluster.report.reliability import plot_goodput_interval

    rows = [[p["interval_min"], p["goodput"], p["ci95"], p["daly_goodput"]]
            for p in sweep["interval_sweep"]]
    return section("goodput", "Goodput against the checkpoint interval",
                   drawn_png(lambda p: plot_goodput_interval(dict(sweep), p, title=title),
                             "goodput against checkpoint interval"),
                   table(["interval (min)", "goodput", "95% CI", "Daly Eq. 9"], rows))


def distribution(d: Mapping[str, Any]) -> str | None:
    """Time to train over the Monte Carlo replicas (``reliability``), as a histogram and its
    percentiles; None when the run has no reliability result."""
    rel = d.get("reliability") or {}
    hist, ttt = rel.get("time_to_train_histogram"), rel.get("time_to_train_days")
    if not hist or not ttt:
        return None
    rows = [[k, ttt[k]] for k in ("p5", "p25", "p50", "p75", "p95", "p99", "mean") if k in ttt]
    good = rel.get("goodput_percentiles") or {}
    rows += [[f"goodput {k}", v] for k, v in good.items()]
    return section("distribution", f"Time to train over {rel.get('replicas', '?')} replicas",
                   svg.histogram(hist["edges_days"], hist["counts"], "days",
                                 "time to train histogram"),
                   table(["statistic", "value"], rows))


def resolved(yaml_text: str) -> str:
    """The resolved scenario (``simcluster validate``'s output) in a ``<pre>``."""
    return section("scenario", "Resolved scenario (simcluster validate)",
                   f"<pre>{escape(yaml_text)}</pre>")


def scenario_page(d: Mapping[str, Any], yaml_text: str, events: Sequence[dict[str, Any]] | None
                  = None, sweep: Mapping[str, Any] | None = None, notes: Sequence[str] = ()
                  ) -> str:
    """The report of one run.

    Parameters
    ----------
    d : Mapping
        ``RunResult.to_dict()`` (``simcluster run --json``).
    yaml_text : str
        The resolved scenario as YAML.
    events : sequence of dict, optional
        Chrome trace events of the DES step (the Gantt is drawn when given).
    sweep : Mapping, optional
        ``SweepResult.to_dict()`` of the goodput-vs-interval sweep (drawn when given).
    notes : sequence of str
        Lines saying why a figure is absent, shown under the summary.
    """
    title = f"simcluster report: {d['scenario']}"
    sections = [summary(d), *(note(n) for n in notes), breakdown(d), memory(d)]
    spread = distribution(d)
    if spread is not None:
        sections.append(spread)
    if events is not None:
        sections.append(gantt_figure(events, str(d["scenario"])))
    if sweep is not None:
        sections.append(goodput_figure(sweep, str(d["scenario"])))
    sections.append(resolved(yaml_text))
    return page(title, sections)
