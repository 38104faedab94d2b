"""The scenario and topology key reference, generated from the spec dataclasses themselves.

``docs/scenarios.md`` is this module's output (a test keeps them equal), so the documented keys,
units, defaults and allowed values can never drift from what the loader accepts.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Union, get_args, get_origin, get_type_hints

from simcluster import units
from simcluster.spec.hardware import TopologySpec
from simcluster.spec.scenario import Scenario
from simcluster.spec.schema import meta_of, yaml_key

HEADER = """# Scenario and topology reference

Generated from the spec dataclasses by `python -m simcluster.report.reference` (a test checks this
file is current). Keys carry their unit; any unit of the same dimension is accepted on input
(`latency_us` or `latency_ms`; `bandwidth_GBps` or `bandwidth_Gbps`). Inside simcluster everything
is SI. `derived` values may be omitted and are computed (`dp` from the GPU count, `kv_heads` from
`heads`, `ffn_hidden` as `4*hidden`). A model, topology or accelerator may be a preset name, or a
mapping with `preset: NAME` plus the keys to change.
"""


def reference_markdown() -> str:
    """Markdown tables of every key of a scenario and a topology file."""
    parts = [HEADER, "## Scenario (`simcluster/scenario/v1`)\n", *_tables(Scenario, ""),
             "## Topology (`simcluster/topology/v1`)\n", *_tables(TopologySpec, "")]
    return "\n".join(parts)


def _tables(cls: type[Any], prefix: str) -> list[str]:
    hints = get_type_hints(cls)
    rows, nested = [], []
    for field in dataclasses.fields(cls):
        inner = _dataclass_of(hints[field.name])
        key = f"{prefix}{yaml_key(field)}"
        if inner is not None and not (cls is Scenario and inner is TopologySpec):
            nested.extend(_tables(inner, f"{key}."))
            rows.append(f"| `{key}` | mapping | {_default(field)} | see `{key}.*` |")
            continue
        rows.append(f"| `{key}` | {_kind(hints[field.name], field)} | {_default(field)} | "
                    f"{_doc(field, cls)} |")
    title = f"### `{prefix[:-1]}`\n" if prefix else ""
    table = "\n".join([title + "| key | type | default | notes |", "|---|---|---|---|", *rows, ""])
    return [table, *nested]


def _dataclass_of(hint: Any) -> type[Any] | None:
    if get_origin(hint) in (Union, types.UnionType):
        hint = next(a for a in get_args(hint) if a is not type(None))
    if get_origin(hint) is dict:
        hint = get_args(hint)[1]
    return hint if dataclasses.is_dataclass(hint) and isinstance(hint, type) else None


def _kind(hint: Any, field: dataclasses.Field[Any]) -> str:
    meta = meta_of(field)
    text = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
    if meta.unit:
        text = f"number ({meta.unit})"
    if meta.choices:
        text = " \\| ".join(meta.choices)
    return text


def _default(field: dataclasses.Field[Any]) -> str:
    meta = meta_of(field)
    if meta.derived:
        return "derived"
    if field.default is not dataclasses.MISSING:
        value: Any = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "defaults"
    if meta.unit and isinstance(value, float):
        value = units.from_si(value, meta.unit)
        return f"`{float(f'{value:.6g}'):g}`"
    return "`null`" if value is None else f"`{value}`"


def _doc(field: dataclasses.Field[Any], cls: type[Any]) -> str:
    meta = meta_of(field)
    bounds = [f"{op} {v:g}" for op, v in ((">=", meta.ge), (">", meta.gt), ("<=", meta.le))
              if v is not None]
    if meta.keys:
        bounds.append("keys: " + ", ".join(meta.keys))
    return "; ".join([b for b in (meta.doc, ", ".join(bounds)) if b])


if __name__ == "__main__":
    print(reference_markdown(), end="")
