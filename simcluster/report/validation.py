"""The one-line form of a run's ``validation`` block (:mod:`simcluster.run.validation`)."""

from __future__ import annotations

from typing import Any

KEYS = ("accelerator", "stack", "precision", "family", "sharding")


def _setting_text(setting_: dict[str, str]) -> str:
    return " x ".join("no stack" if setting_[k] == "-" else setting_[k] for k in KEYS)


def _errors_text(sources: list[dict[str, Any]]) -> str:
    return "; ".join(f"{src['source']}: {src['rows']} runs, median |error| "
                     f"{src['median_abs_error']:.1%}, p90 {src['p90_abs_error']:.1%}, "
                     f"mean {src['mean_error']:+.1%}" for src in sources)


def validation_short(block: dict[str, Any]) -> str:
    """The sweep table's column: the largest source's median |error|, or ``no``."""
    if block["status"] != "validated":
        return "no"
    top = max(block["sources"], key=lambda src: src["rows"])
    return f"{top['source']} {top['median_abs_error']:.1%}"


def validation_text(block: dict[str, Any]) -> str:
    """One line: validated (with the errors) or NOT VALIDATED (with the nearest that is)."""
    where = _setting_text(block["setting"])
    if block["status"] == "validated":
        return f"validated for {where} ({_errors_text(block['sources'])}; + = faster than measured)"
    near = block["nearest"]
    return (f"NOT VALIDATED for {where}; nearest validated: {_setting_text(near['setting'])} "
            f"({_errors_text(near['sources'])}); {block['gemm']}")


def coverage_table() -> str:
    """``simcluster validate --coverage``: every validated setting, its sources and errors."""
    from simcluster import catalog
    from simcluster.report.table import format_table

    doc = catalog.load_packaged("validation")
    rows = [[*("no stack" if e[k] == "-" else e[k] for k in KEYS), e["source"], str(e["rows"]),
             f"{e['median_abs_error']:.1%}", f"{e['p90_abs_error']:.1%}", f"{e['mean_error']:+.1%}"]
            for e in doc["settings"]]
    table = format_table([*KEYS, "source", "runs", "median |err|", "p90 |err|", "mean err"], rows)
    sources = "\n".join(f"  {name}: {s['citation']} ({s['test']})"
                        for name, s in doc["sources"].items())
    return (f"{table}\n\nerror: {doc['error']}; engine: {doc['engine']} (closed form)\n"
            f"sources:\n{sources}\nAnything else is not validated: `simcluster run` names the "
            "nearest validated setting.")
