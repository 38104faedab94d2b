"""What a sweep searches: the ``sweep:`` section of a scenario file, refined by command-line flags.

```yaml
sweep:
  options:                  # hardware options side by side; a list inside ``set`` is swept
    - name: dgx-a100
      set: {cluster.topology: dgx-a100-80gb, cluster.nodes: [2, 4, 8], cost: buy}
  vary: {checkpoint.interval_min: [30, 60, 120]}   # every combination, within every option
  layouts: search           # or fixed: the file's own layout
  search: {schedule: [1f1b, interleaved], max_virtual_stages: 4}   # restrict layout axes
  objective: time_to_train_days
  constraints: {max_gpus: 1024, max_cost_usd: 5.0e6, max_days: 90, memory_headroom_gib: 2}  # or auto
  top: 10
  rerank: 50                # the DES on the best 50
  goodput: 3                # the reliability engine on the best 3
```
Every error names the file and the key (``sweep.options[1].set``) or the flag (``--vary``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from simcluster.errors import SpecError
from simcluster.spec.scenario import OFFLOADS, RECOMPUTE, SCHEDULES
from simcluster.sweep.evaluate import Setting
from simcluster.sweep.space import AXES, DEFAULT_MAX_VIRTUAL_STAGES, LAYOUT_KEYS, SearchAxes

#: Objective -> True when larger is better.
OBJECTIVES = {"step_time_s": False, "tokens_per_s": True, "mfu": True,
              "time_to_train_days": False, "cost_usd": False, "capital_usd": False,
              "cash_usd": False,
              "goodput_time_to_train_days": False}
#: The objective names of docs/sweep.md (``--objective time|cost|cash|goodput``).
ALIASES = {"time": "time_to_train_days", "cost": "cost_usd", "cash": "cash_usd",
           "goodput": "goodput_time_to_train_days"}
LAYOUT_MODES = ("search", "fixed")
MAX_SETTINGS = 10_000
_SECTION_KEYS = ("options", "vary", "layouts", "search", "objective", "constraints", "top",
                 "rerank", "goodput")
_CONSTRAINT_KEYS = ("max_gpus", "max_cost_usd", "max_days", "memory_headroom_gib")
_AXIS_CHOICES: dict[str, tuple[Any, ...]] = {"schedule": SCHEDULES, "recompute": RECOMPUTE,
                                             "sequence_parallel": (False, True),
                                             "zero_stage": (0, 1, 2, 3), "offload": OFFLOADS}


@dataclass(frozen=True, slots=True)
class Constraints:
    """Limits a ranked layout must meet (``None``: no limit)."""

    max_gpus: int | None = None
    max_cost_usd: float | None = None
    max_days: float | None = None
    memory_headroom_gib: float | None = None  # None: ``auto`` (evaluate.memory_refusal)


@dataclass(frozen=True, slots=True)
class Plan:
    """A sweep, fully stated: the settings, the layout axes, the ranking and the later passes."""

    settings: tuple[Setting, ...]
    axes: SearchAxes = field(default_factory=SearchAxes)
    layouts: str = "search"
    objective: str = "step_time_s"
    constraints: Constraints = field(default_factory=Constraints)
    top: int = 10
    rerank: int = 0
    goodput: int = 0


def yaml_text(value: object) -> str:
    """``value`` as a one-line YAML flow value (an override's right-hand side)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix("...")\
        .strip()


def parse_values(flag: str, text: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` -> key and the values, each read as YAML (``--vary``, ``--search``)."""
    key, sep, values = text.partition("=")
    if not sep or not key.strip() or not values.strip():
        raise SpecError(flag, f"expected KEY=V1,V2,... got {text!r}")
    out = [yaml.safe_load(v) for v in values.split(",")]
    if any(v is None for v in out):
        raise SpecError(flag, f"{text!r} has an empty value")
    return key.strip(), out


#: The option a file without ``sweep.options`` stands for when ``--option`` adds others.
FILE_OPTION = "file"


def parse_option(text: str) -> dict[str, Any]:
    """``--option 'NAME: KEY=V1,V2 KEY=V'`` -> ``{name, set}`` as in ``sweep.options``: one more
    hardware option beside the others, whose lists are swept inside it alone (``--vary``
    multiplies every option)."""
    name, sep, rest = text.partition(":")
    if not sep or not name.strip() or not rest.split():
        raise SpecError("--option", f"expected 'NAME: KEY=V1,V2 KEY=V ...', got {text!r}")
    values = dict(parse_values("--option", item) for item in rest.split())
    return {"name": name.strip(), "set": {k: v if len(v) > 1 else v[0] for k, v in values.items()}}


def as_mapping(value: object, key: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(key, f"expected a mapping, got {value!r}", source)
    return value


def _unknown(section: Mapping[str, Any], allowed: Sequence[str], key: str, source: str) -> None:
    for name in section:
        if name not in allowed:
            raise SpecError(f"{key}.{name}", f"unknown key; expected one of {', '.join(allowed)}",
                            source)


def as_int(value: object, key: str, source: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpecError(key, f"expected an integer >= {low}, got {value!r}", source)
    return value


def _number(value: object, key: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise SpecError(key, f"expected a number >= 0, got {value!r}", source)
    return float(value)


def _headroom(value: object, key: str, source: str) -> float | None:
    """``auto`` (None) or GiB >= 0."""
    if value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise SpecError(key, f"expected GiB >= 0 or auto, got {value!r}", source)
    return float(value)


def read_section(raw: object, source: str) -> dict[str, Any]:
    """The ``sweep:`` section, checked key by key (``{}`` when absent)."""
    if raw is None:
        return {}
    section = dict(as_mapping(raw, "sweep", source))
    _unknown(section, _SECTION_KEYS, "sweep", source)
    return section


def constraints_from(raw: object, flags: Mapping[str, Any], source: str) -> Constraints:
    """The section's ``constraints`` with any flag given on the command line replacing it."""
    values = dict(as_mapping(raw, "sweep.constraints", source)) if raw is not None else {}
    _unknown(values, _CONSTRAINT_KEYS, "sweep.constraints", source)
    values.update({k: v for k, v in flags.items() if v is not None})
    out: dict[str, Any] = {}
    for key, value in values.items():
        where = f"sweep.constraints.{key}"
        if key == "memory_headroom_gib":
            out[key] = _headroom(value, where, source)
        else:
            out[key] = (as_int(value, where, source, 1) if key == "max_gpus"
                        else _number(value, where, source))
    return Constraints(**out)


def axes_from(raw: object, flags: Sequence[str], source: str) -> SearchAxes:
    """Layout axes restricted by the section's ``search`` and by ``--search KEY=V1,V2``."""
    values = dict(as_mapping(raw, "sweep.search", source)) if raw is not None else {}
    top = values.pop("max_virtual_stages", DEFAULT_MAX_VIRTUAL_STAGES)
    top = as_int(top, "sweep.search.max_virtual_stages", source, 1)
    where = {k: ("sweep.search." + k, source) for k in values}
    for text in flags:
        key, items = parse_values("--search", text)
        values[key] = items
        where[key] = ("--search", "")
    axes: dict[str, tuple[Any, ...]] = {}
    for key, items in values.items():
        at, src = where[key]
        if key not in AXES:
            raise SpecError(at, f"{key!r} is not a layout axis; expected one of {', '.join(AXES)}",
                            src)
        seq = items if isinstance(items, list) else [items]
        choices = _AXIS_CHOICES.get(key)
        for item in seq:
            bad = (item not in choices) if choices else (isinstance(item, bool)
                                                         or not isinstance(item, int) or item < 1)
            if bad:
                want = ", ".join(map(str, choices)) if choices else "a positive integer"
                raise SpecError(at, f"{key}: {item!r} is not one of {want}", src)
        axes[key] = tuple(seq)
    return SearchAxes(values=axes, max_virtual_stages=top)


def settings_from(options: object, vary: Mapping[str, list[Any]], source: str,
                  vary_flags: Sequence[str] = (), search: bool = True,
                  option_flags: Sequence[str] = ()) -> tuple[Setting, ...]:
    """Every (option x varied values) combination, in a fixed order.

    In a layout search the layout keys (``parallelism.tp``, ...) are the search's own axes and
    cannot be varied; the other ``parallelism`` keys (``global_batch``) can. Each
    ``--option`` (:func:`parse_option`) is one more option after the file's; a file without
    options then counts as one, named ``file``.
    """
    if option_flags and options is None:
        options = [{"name": FILE_OPTION}]
    if option_flags and isinstance(options, list):  # anything else is refused by _options
        options = [*options, *(parse_option(text) for text in option_flags)]
    axes = dict(vary)
    for text in vary_flags:
        key, items = parse_values("--vary", text)
        axes[key] = items
    for key in axes:
        name = key.removeprefix("parallelism.")
        if search and key.startswith("parallelism.") and name in LAYOUT_KEYS:
            raise SpecError("--vary", f"{key} is a layout axis of the search: restrict it with "
                            f"--search {name}=... (or use --layouts fixed)")
    opts = _options(options, source)
    count = len(opts) * math.prod(len(values) for values in axes.values())
    if count > MAX_SETTINGS:  # counted before any is built
        raise SpecError("sweep", f"{count:,} settings (options x varied values); at most "
                        f"{MAX_SETTINGS:,}", source)
    return tuple(Setting(option=name, overrides=(*own, *extra), columns=(*own_cols, *extra_cols))
                 for name, own, own_cols in opts for extra, extra_cols in _product(axes))


def _product(axes: Mapping[str, list[Any]]
             ) -> list[tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]]:
    keys = list(axes)
    out = []
    for combo in itertools.product(*(axes[k] for k in keys)):
        overrides = tuple(f"{k}={yaml_text(v)}" for k, v in zip(keys, combo, strict=True))
        out.append((overrides, tuple((k, _column(v)) for k, v in zip(keys, combo, strict=True))))
    return out


def _column(value: object) -> Any:
    """A varied value as a result column: scalars as they are, ``null`` empty, the rest as YAML."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return yaml_text(value)


def _options(raw: object, source: str
             ) -> list[tuple[str, tuple[str, ...], tuple[tuple[str, Any], ...]]]:
    if raw is None:
        return [("", (), ())]
    if not isinstance(raw, list) or not raw:
        raise SpecError("sweep.options", "expected a non-empty list of {name, set}", source)
    out = []
    names: set[str] = set()
    for i, item in enumerate(raw):
        key = f"sweep.options[{i}]"
        option = as_mapping(item, key, source)
        _unknown(option, ("name", "set"), key, source)
        name = option.get("name")
        if not isinstance(name, str) or not name or name in names:
            raise SpecError(f"{key}.name", f"expected a unique non-empty name, got {name!r}",
                            source)
        names.add(name)
        values = as_mapping(option.get("set", {}), f"{key}.set", source)
        lists = {k: (v if isinstance(v, list) else [v]) for k, v in values.items()}
        out += [(name, ov, cols) for ov, cols in _product(lists)]
    return out
