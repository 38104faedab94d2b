"""Text and JSON of a sweep: the ranked table, the Pareto front, the rejections, the options."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simcluster.report.table import format_table
from simcluster.sweep.driver import SweepOutcome
from simcluster.sweep.rank import rank
from simcluster.sweep.runner import Row


def layout_text(row: Row) -> str:
    """``tp8 pp16 dp8 mb1 interleaved/2 full sp z1`` (only the non-default parts of cp, ep and
    expert_tp: ``tp2 pp8 ep32 etp1 ...`` where the experts are not split like TP)."""
    parts = [f"tp{row['tp']}", f"pp{row['pp']}"]
    parts += [f"cp{row['cp']}"] if row.get("cp", 1) != 1 else []
    parts += [f"ep{row['ep']}"] if row.get("ep", 1) != 1 else []
    etp = row.get("expert_tp")
    parts += [f"etp{etp}"] if etp not in (None, "") and str(etp) != str(row["tp"]) else []
    parts += [f"dp{row['dp']}", f"mb{row['micro_batch']}"]
    schedule = str(row["schedule"])
    parts.append(f"{schedule}/{row['virtual_stages']}" if schedule == "interleaved" else schedule)
    parts.append(str(row["recompute"]))
    parts += ["sp"] if row.get("sequence_parallel") else []
    parts.append(f"z{row['zero_stage']}")
    parts += [f"offload:{row['offload']}"] if row.get("offload") not in (None, "none") else []
    parts += [f"layers[{runs_text(str(row['stage_layers']))}]"] if row.get("stage_layers") else []
    return " ".join(parts)


def shape_text(row: Row) -> str:
    """The layout as it runs: the schedule (and its virtual stages) only where there is a
    pipeline; at pp = 1 gpipe, 1f1b, zero-bubble and interleaved run the same step."""
    text = layout_text(row)
    if int(row.get("pp", 1) or 1) == 1:
        schedule = str(row["schedule"])
        shown = f"{schedule}/{row['virtual_stages']}" if schedule == "interleaved" else schedule
        text = text.replace(f" {shown} ", " ", 1)
    return text


def shape_labels(rows: Sequence[Row], indexes: Sequence[int]) -> list[str]:
    """:func:`shape_text` of each row, or its whole layout (the schedule named) where two rows of
    the table would otherwise read alike: zb-h1 at pp = 1 still splits the backward, which the DES
    prices, so it can differ from gpipe and 1f1b there."""
    texts = [shape_text(rows[i]) for i in indexes]
    return [layout_text(rows[i]) if texts.count(t) > 1 else t
            for i, t in zip(indexes, texts, strict=True)]


def best_per_parallel(rows: Sequence[Row], ranked: Sequence[int], top: int) -> list[int]:
    """The best-ranked row of each (option, tp, pp, cp, ep, expert_tp) in rank order, at most
    ``top``: which split of the model wins, whatever its micro-batch, schedule or recompute."""
    seen: set[tuple[object, ...]] = set()
    out: list[int] = []
    for i in ranked:
        r = rows[i]
        key = (r.get("option"), r.get("tp"), r.get("pp"), r.get("cp", 1), r.get("ep", 1),
               r.get("expert_tp"))
        if key not in seen:
            seen.add(key)
            out.append(i)
            if len(out) >= top:
                break
    return out


def _shape_key(row: Row) -> tuple[object, ...]:
    """Rows with the same key are one shape: the same layout as it runs and the same results
    (step time, memory, cost, capital, goodput to 4 significant digits)."""
    def sig(value: object) -> object:
        return float(f"{value:.4g}") if isinstance(value, float) else value
    return (shape_text(row), *(sig(row.get(k)) for k in
                               ("step_time_s", "peak_memory_gib", "cost_usd", "capital_usd",
                                "goodput", "gpus")))


def distinct_shapes(rows: Sequence[Row], ranked: Sequence[int], top: int,
                    scan: int = 50) -> list[tuple[int, list[int]]]:
    """The first ``top`` distinct shapes of ``ranked``, each (its best row, the rows that repeat
    it: other schedule names at pp = 1, equivalent options), looking ``scan`` x ``top`` rows deep."""
    found: dict[tuple[object, ...], tuple[int, list[int]]] = {}
    for i in ranked[:max(top, 1) * scan]:
        key = _shape_key(rows[i])
        if key in found:
            found[key][1].append(i)
        elif len(found) < top:
            found[key] = (i, [])
    return list(found.values())


def _variants_text(rows: Sequence[Row], best: int, others: list[int]) -> str:
    """``+2: 1f1b, zb-h1`` / ``+1: 3090ti-pcie-boxes``: what differs in the repeated rows."""
    if not others:
        return ""
    names: list[str] = []
    for i in others:
        r = rows[i]
        parts = [str(r.get("option"))] if r.get("option") != rows[best].get("option") else []
        parts += [str(r["schedule"])] if r.get("schedule") != rows[best].get("schedule") else []
        name = " ".join(parts) or "same"
        if name not in names:
            names.append(name)
    return f"+{len(others)}: " + ", ".join(names)


def runs_text(stage_layers: str) -> str:
    """``1,1,2,2,2,1`` -> ``1x2,2x3,1`` (runs of equal chunk sizes)."""
    out: list[list[str | int]] = []
    for item in stage_layers.split(","):
        if out and out[-1][0] == item:
            out[-1][1] = int(out[-1][1]) + 1
        else:
            out.append([item, 1])
    return ",".join(f"{v}x{n}" if n != 1 else str(v) for v, n in out)


def _varied(outcome: SweepOutcome) -> list[str]:
    keys: list[str] = []
    for setting in outcome.plan.settings:
        keys += [k for k, _ in setting.columns if k not in keys]
    return keys


def _table(outcome: SweepOutcome, indexes: Sequence[int], numbered: bool = True,
           variants: Sequence[str] = ()) -> str:
    rows = outcome.rows
    options = any(rows[i].get("option") for i in indexes)
    varied = _varied(outcome)
    goodput = any(rows[i].get("goodput") is not None for i in indexes)
    capital = any(rows[i].get("capital_usd") is not None for i in indexes)
    headers = ["#"] + (["option"] if options else []) + varied + [
        "layout", "engine", "step s", "tokens/s", "MFU", "GiB", "days", "cost $", "validated"]
    headers += ["capital $", "cash $"] if capital else []
    headers += ["goodput", "ckpt min", "days w/ failures"] if goodput else []
    headers += ["same results"] if any(variants) else []
    body = []
    labels = shape_labels(rows, indexes)
    for n, i in enumerate(indexes):
        r = rows[i]
        line: list[object] = [n + 1 if numbered else outcome.ranked.index(i) + 1]
        line += [r.get("option")] if options else []
        line += [r.get(k) for k in varied]
        line += [labels[n], r.get("engine", "analytical"), r.get("step_time_s"),
                 r.get("tokens_per_s"), r.get("mfu"), r.get("peak_memory_gib"),
                 r.get("time_to_train_days"), _money(r.get("cost_usd")), r.get("validation")]
        line += [_money(r.get("capital_usd")), _money(r.get("cash_usd"))] if capital else []
        if goodput:
            line += [r.get("goodput"), r.get("checkpoint_interval_min"),
                     r.get("goodput_time_to_train_days")]
        line += [variants[n]] if any(variants) else []
        body.append(line)
    return format_table(headers, body)


def _money(value: object) -> object:
    return f"{value:,.0f}" if isinstance(value, float) else value


def rejections_text(outcome: SweepOutcome) -> str:
    """The rejection counts by level and key, with one example message each."""
    rows = [(f"{count:,}", lv, key, example[:100]) for lv, key, count, example
            in outcome.rejections.rows()]
    if not rows:
        return "(none)"
    headers = ("rejected", "level", "key", "example")
    widths = [max(len(str(r[i])) for r in (headers, *rows)) for i in range(4)]
    lines = ["  ".join([str(r[0]).rjust(widths[0]), *(str(c).ljust(w) for c, w in
                                                       zip(r[1:], widths[1:], strict=True))]).rstrip()
             for r in (headers, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def options_text(outcome: SweepOutcome) -> str:
    """Each option's best layout (capacity planning): time, cost, capital and cash side by side
    (cash: the rent, or the capital plus electricity when buying; docs/cost.md)."""
    rows = outcome.rows
    names: list[str] = []
    for i in outcome.ranked:
        name = str(rows[i].get("option") or "")
        if name not in names:
            names.append(name)
    body = []
    for name in names:
        mine = [i for i in outcome.ranked if rows[i].get("option") == name]
        best = rank(rows, mine, outcome.plan.objective)[0]
        r = rows[best]
        body.append([name, r.get("nodes"), r.get("gpus"), layout_text(r), r.get("step_time_s"),
                     r.get("time_to_train_days"), _money(r.get("cost_usd")),
                     _money(r.get("capital_usd")), _money(r.get("cash_usd")),
                     r.get("peak_memory_gib"), r.get("memory_capacity_gib")])
    headers = ["option", "nodes", "gpus", "best layout", "step s", "days", "cost $",
               "capital $", "cash $", "GiB", "of GiB"]
    return format_table(headers, body)


def distinct_points(outcome: SweepOutcome) -> tuple[list[int], int]:
    """The Pareto rows with one row (the best ranked) per distinct point, and how many tied."""
    x, y = outcome.pareto_axes
    seen: dict[tuple[object, object], int] = {}
    order = {i: n for n, i in enumerate(outcome.ranked)}
    for i in sorted(outcome.pareto, key=lambda i: order[i]):
        seen.setdefault((outcome.rows[i].get(x), outcome.rows[i].get(y)), i)
    front = [i for i in outcome.pareto if i in set(seen.values())]
    return front, len(outcome.pareto) - len(front)


def sweep_text(outcome: SweepOutcome, top: int) -> str:
    """The whole summary ``simcluster sweep`` prints."""
    rows = outcome.rows
    timed = sum(1 for r in rows if r.get("status") == "ok")
    lines = [f"{len(rows):,} candidate layouts evaluated ({timed:,} fit and were timed, "
             f"{len(outcome.ranked):,} meet the constraints); objective: "
             f"{outcome.plan.objective}", ""]
    if not outcome.ranked:
        lines += ["no layout fits and meets the constraints", ""]
    else:
        shapes = distinct_shapes(rows, outcome.ranked, top)
        best = [i for i, _ in shapes]
        lines += [f"best {len(shapes)} distinct shapes (layouts with identical results by "
                  "construction are one row; 'same results' lists them)",
                  _table(outcome, best, variants=[_variants_text(rows, i, o) for i, o in shapes]),
                  ""]
        lines += _validation_lines(outcome, best)
        per = best_per_parallel(rows, outcome.ranked, top)
        lines += ["best per parallel shape (option, tp, pp, cp, ep, expert_tp: its best layout, "
                  "best first)", _table(outcome, per), ""]
        if len({r.get("option") for r in rows}) > 1:
            lines += ["best per option", options_text(outcome)]
            table = [p for p in outcome.files if p.suffix == ".parquet"]
            lines += [f"plot: python analysis/plot_planning.py {table[0]}"] if table else []
            lines.append("")
        front, ties = distinct_points(outcome)
        tied = f"; {ties} more layouts tie with a point shown" if ties else ""
        lines += [f"Pareto front ({outcome.pareto_axes[0]} vs {outcome.pareto_axes[1]}; "
                  f"# is the rank{tied})", _table(outcome, front, numbered=False), ""]
    lines += ["rejected", rejections_text(outcome)]
    lines += [f"note: {n}" for n in outcome.notes]
    lines.append("took " + ", ".join(f"{k} {v:.1f} s" for k, v in outcome.timings_s.items()))
    lines += [f"written: {p}" for p in outcome.files]
    return "\n".join(lines)


def _pair_label(option: str, zero3: bool, sharded: bool) -> str:
    """`` (option, ZeRO-3)``: what tells two validation lines apart."""
    parts = [option] if option else []
    parts += (["ZeRO-3"] if zero3 else ["replicated"]) if sharded else []
    return f" ({', '.join(parts)})" if parts else ""


def _validation_lines(outcome: SweepOutcome, indexes: Sequence[int]) -> list[str]:
    """One ``validation`` line per option (and sharding) among the rows shown."""
    pairs: list[tuple[str, bool]] = []
    for i in indexes:
        r = outcome.rows[i]
        pair = (str(r.get("option") or ""), r.get("zero_stage") == 3)
        if pair not in pairs and pair in outcome.validation:
            pairs.append(pair)
    sharded = len({z for _, z in pairs}) > 1
    lines = [f"validation{_pair_label(o, z, sharded)}: {outcome.validation[(o, z)]}"
             for o, z in pairs]
    return [*lines, ""] if lines else []


def sweep_dict(outcome: SweepOutcome, top: int) -> dict[str, Any]:
    """The JSON of ``simcluster sweep --json``: top rows, Pareto rows, rejections, files."""
    rows = outcome.rows
    return {"objective": outcome.plan.objective, "evaluated": len(rows),
            "eligible": len(outcome.ranked),
            "top": [{**rows[i], "rank": outcome.ranked.index(i) + 1,
                     "same_results": [outcome.ranked.index(j) + 1 for j in others]}
                    for i, others in distinct_shapes(rows, outcome.ranked, top)],
            "best_per_parallel": [{**rows[i], "rank": outcome.ranked.index(i) + 1}
                                  for i in best_per_parallel(rows, outcome.ranked, top)],
            "pareto_axes": list(outcome.pareto_axes),
            "pareto": [rows[i] for i in outcome.pareto],
            "rejections": [dict(zip(("level", "key", "count", "example"), r, strict=True))
                           for r in outcome.rejections.rows()],
            "notes": outcome.notes, "files": [str(p) for p in outcome.files],
            "validation": sorted(set(outcome.validation.values())),
            "timings_s": dict(outcome.timings_s)}
