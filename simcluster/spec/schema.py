"""Strict, declarative mapping <-> frozen-dataclass conversion for every spec.

Each spec is a frozen dataclass whose fields carry a :class:`Meta` (via :func:`spec_field`): the YAML
unit of the key, bounds, allowed values and whether a missing value is derived. :func:`parse` reads a
mapping into such a dataclass: unknown keys are rejected with a suggestion, unit-suffixed keys are
converted to SI once, bounds and choices are checked, and every error is a :class:`SpecError`
carrying the dotted key path. :func:`dump` is the exact inverse, so that ``parse(dump(x)) == x``.

Attribute names are SI (``bandwidth_Bps``, ``latency_s``); the YAML key is the stem plus the unit
(``bandwidth_GBps``). Any suffix of the same dimension is accepted on input (``latency_ms``).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
from collections.abc import Mapping
from typing import Any, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from simcluster import units
from simcluster.errors import InvariantError, SpecError

T = TypeVar("T")
#: The largest integer a float holds exactly; int-valued keys written as floats must not exceed it.
MAX_EXACT_INT = 2**53
Context = Mapping[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Meta:
    """How one field appears in YAML and what values it takes."""

    unit: str | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    choices: tuple[str, ...] | None = None
    keys: tuple[str, ...] | None = None
    derived: bool = False
    doc: str = ""


def spec_field(
    default: Any = dataclasses.MISSING,
    *,
    unit: str | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    choices: tuple[str, ...] | None = None,
    keys: tuple[str, ...] | None = None,
    derived: bool = False,
    doc: str = "",
) -> Any:
    """A dataclass field with its YAML metadata (see :class:`Meta`)."""
    meta = Meta(unit, ge, gt, le, choices, keys, derived, doc)
    if isinstance(default, (dict, list)):
        frozen = default
        return dataclasses.field(default_factory=lambda: type(frozen)(frozen), metadata={"spec": meta})
    if derived and default is dataclasses.MISSING:
        return dataclasses.field(metadata={"spec": meta})
    return dataclasses.field(default=default, metadata={"spec": meta})


def meta_of(field: dataclasses.Field[Any]) -> Meta:
    """The :class:`Meta` of a field (a bare default when the field has none)."""
    meta = field.metadata.get("spec")
    return meta if isinstance(meta, Meta) else Meta()


def yaml_key(field: dataclasses.Field[Any]) -> str:
    """The canonical YAML key of a field: ``bandwidth_Bps`` with unit GBps -> ``bandwidth_GBps``."""
    meta = meta_of(field)
    if meta.unit is None:
        return field.name
    return f"{_stem(field)}_{meta.unit}"


def _stem(field: dataclasses.Field[Any]) -> str:
    meta = meta_of(field)
    if meta.unit is None:
        return field.name
    si = units.dimension(meta.unit)
    suffix = f"_{si}"
    if not field.name.endswith(suffix):
        raise InvariantError(f"field {field.name} with unit {meta.unit} must end in {suffix}")
    return field.name[: -len(suffix)]


# ---------------------------------------------------------------------------------------- parsing


def parse(cls: type[T], raw: object, path: str = "", context: Context | None = None) -> T:
    """Read ``raw`` (a mapping from YAML) into the frozen dataclass ``cls``.

    Raises
    ------
    SpecError
        With the dotted key path, for an unknown, missing, mistyped or out-of-range value.
    """
    if not isinstance(raw, Mapping):
        raise SpecError(path, f"expected a mapping, got {_show(raw)}")
    values = convert_fields(cls, raw, path, context)
    ctx = {**(context or {}), **values}
    derive = getattr(cls, "derive", None)
    if derive is not None:
        _run_derive(derive, values, ctx, path)
    _check_missing(_class_info(cast(Any, cls))[1], values, path)
    try:
        return cls(**values)
    except SpecError as err:
        raise err.within("", path) from None


def convert_fields(cls: type, raw: Mapping[Any, Any], path: str = "",
                   context: Context | None = None) -> dict[str, Any]:
    """The keys of ``raw`` read as fields of ``cls``: checked and converted, nothing derived.

    Keys are resolved (units, typos) and values converted in field declaration order, so the first
    error is the one :func:`parse` would raise; missing fields are simply absent from the result.
    """
    hints, fields, by_key = _class_info(cls)
    found: dict[str, tuple[str, str | None, object]] = {}
    for key, value in raw.items():
        name, suffix = _resolve_key(key, by_key, fields, path)
        if name in found:
            raise SpecError(_join(path, str(key)), f"'{_stem(fields[name])}' is given twice")
        found[name] = (str(key), suffix, value)
    # Fields are read in declaration order; later fields see earlier siblings in the context
    # (e.g. parallelism derives dp from the cluster's GPU count).
    values: dict[str, Any] = {}
    for name in fields:
        if name not in found:
            continue
        key, suffix, value = found[name]
        ctx: Context = {**(context or {}), **values}
        values[name] = _convert(hints[name], meta_of(fields[name]), value, suffix,
                                _join(path, key), ctx)
    return values


@functools.cache
def _class_info(cls: Any) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]],
                                    dict[str, tuple[str, str | None]]]:
    """Type hints, fields by name and the accepted-key index of a spec class (computed once)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return get_type_hints(cls), fields, _key_index(fields.values())


def _run_derive(derive: Any, values: dict[str, Any], ctx: Context, path: str) -> None:
    try:
        derive(values, ctx)
    except SpecError as err:
        raise err.within("", path) from None


def _check_missing(fields: Mapping[str, dataclasses.Field[Any]], values: Mapping[str, Any],
                   path: str) -> None:
    for name, field in fields.items():
        if name in values or field.default is not dataclasses.MISSING:
            continue
        if field.default_factory is not dataclasses.MISSING:
            continue
        raise SpecError(_join(path, yaml_key(field)), "missing (required)")


def _key_index(fields: Any) -> dict[str, tuple[str, str | None]]:
    """Every accepted YAML key -> (field name, unit suffix)."""
    index: dict[str, tuple[str, str | None]] = {}
    for field in fields:
        meta = meta_of(field)
        if meta.unit is None:
            index[field.name] = (field.name, None)
            continue
        for suffix in units.same_dimension(meta.unit):
            index[f"{_stem(field)}_{suffix}"] = (field.name, suffix)
    return index


def _resolve_key(key: object, by_key: Mapping[str, tuple[str, str | None]],
                 fields: Mapping[str, dataclasses.Field[Any]], path: str) -> tuple[str, str | None]:
    if not isinstance(key, str):
        raise SpecError(_join(path, str(key)), f"keys must be strings, got {_show(key)}")
    if key in by_key:
        return by_key[key]
    canonical = [yaml_key(f) for f in fields.values()]
    split = units.split_suffix(key)
    stem = split[0] if split else key
    for field in fields.values():
        if meta_of(field).unit is not None and _stem(field) == stem:
            allowed = ", ".join(f"{stem}_{s}" for s in units.same_dimension(meta_of(field).unit or ""))
            raise SpecError(_join(path, key), f"wrong or missing unit suffix; expected one of {allowed}")
    hint = difflib.get_close_matches(key, canonical, n=1)
    did_you_mean = f" (did you mean '{hint[0]}'?)" if hint else ""
    raise SpecError(_join(path, key),
                    f"unknown key{did_you_mean}; allowed keys: {', '.join(canonical)}")


def _convert(hint: Any, meta: Meta, value: object, suffix: str | None, where: str,
             ctx: Context) -> Any:
    origin = get_origin(hint)
    args = get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], meta, value, suffix, where, ctx)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return parse(hint, _scalar_form(hint, value, where), where, ctx)
    if origin is dict:
        return _convert_dict(args[1], meta, value, suffix, where, ctx)
    if origin is tuple:
        return _convert_tuple(args[0], meta, value, where, ctx)
    return _convert_scalar(hint, meta, value, suffix, where)


def _scalar_form(cls: type, value: object, where: str) -> object:
    """A scalar that a spec class accepts in place of its mapping (``checkpoint: none``).

    ``--set cost.X=...`` on ``cost: buy`` makes ``{preset: buy, X: ...}``: the form refined by X.
    """
    forms: Mapping[str, Mapping[str, Any]] = getattr(cls, "scalar_forms", {})
    preset = value.get("preset") if isinstance(value, Mapping) else None
    if isinstance(value, Mapping) and isinstance(preset, str) and preset in forms:
        return {**forms[preset], **{k: v for k, v in value.items() if k != "preset"}}
    if not isinstance(value, str) or not forms:
        return value
    if value not in forms:
        raise SpecError(where, f"expected a mapping or {' | '.join(forms)}, got {_show(value)}")
    return dict(forms[value])


def _convert_dict(value_type: Any, meta: Meta, value: object, suffix: str | None, where: str,
                  ctx: Context) -> Any:
    if not isinstance(value, Mapping):
        raise SpecError(where, f"expected a mapping, got {_show(value)}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise SpecError(_join(where, str(key)), f"keys must be strings, got {_show(key)}")
        if meta.keys is not None and key not in meta.keys:
            raise SpecError(_join(where, key), f"unknown key; expected one of {', '.join(meta.keys)}")
        item_meta = dataclasses.replace(meta, keys=None, choices=None)
        out[key] = _convert(value_type, item_meta, item, suffix, _join(where, key), ctx)
    return out


def _convert_tuple(item_type: Any, meta: Meta, value: object, where: str, ctx: Context) -> Any:
    if not isinstance(value, (list, tuple)):
        raise SpecError(where, f"expected a list, got {_show(value)}")
    return tuple(_convert(item_type, meta, v, None, f"{where}[{i}]", ctx) for i, v in enumerate(value))


def _convert_scalar(hint: Any, meta: Meta, value: object, suffix: str | None, where: str) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise SpecError(where, f"expected true or false, got {_show(value)}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise SpecError(where, f"expected a string, got {_show(value)}")
        if meta.choices is not None and value not in meta.choices:
            raise SpecError(where, f"{value!r} is not one of {' | '.join(meta.choices)}")
        return value
    if hint is int:
        return _bounded(_as_int(value, where), meta, where)
    if hint is float:
        number = _as_float(value, where)
        _bounded(number, meta, where)
        return units.to_si(number, suffix) if suffix else number
    raise InvariantError(f"{where}: unsupported field type {hint!r}")


def _as_int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(where, f"expected an integer, got {_show(value)}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise SpecError(where, f"expected an integer, got {value!r}")
    if isinstance(value, float) and abs(value) > MAX_EXACT_INT:
        raise SpecError(where, f"expected an integer, got {value!r}: a number written as a float "
                        f"must be at most 2**53 = {MAX_EXACT_INT} to be an exact integer")
    return int(value)


def _as_float(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(where, f"expected a number, got {_show(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise SpecError(where, f"expected a finite number, got {value!r}")
    return number


def _bounded(number: float, meta: Meta, where: str) -> Any:
    if meta.gt is not None and not number > meta.gt:
        raise SpecError(where, f"must be > {_bound(meta.gt)}, got {number!r}")
    if meta.ge is not None and not number >= meta.ge:
        raise SpecError(where, f"must be >= {_bound(meta.ge)}, got {number!r}")
    if meta.le is not None and not number <= meta.le:
        raise SpecError(where, f"must be <= {_bound(meta.le)}, got {number!r}")
    return number


def _bound(limit: float) -> str:
    """A bound as written in messages: integers in full (``1099511627776``), else ``%g``."""
    if float(limit).is_integer() and abs(limit) <= MAX_EXACT_INT:
        return str(int(limit))
    return f"{limit:g}"


# ---------------------------------------------------------------------------------------- dumping


def dump(spec: object) -> dict[str, Any]:
    """The plain mapping of a spec, every field present, in the units of its canonical key.

    A value that would not survive the unit round trip bit for bit is written with its SI key
    (``latency_s`` instead of ``latency_us``), so that ``parse(type(x), dump(x)) == x`` always.
    """
    out: dict[str, Any] = {}
    for field in dataclasses.fields(spec):  # type: ignore[arg-type]
        value = getattr(spec, field.name)
        meta = meta_of(field)
        if meta.unit is not None and isinstance(value, float):
            out.update(_dump_unit(field, meta.unit, value))
        elif meta.unit is not None and isinstance(value, dict):
            out.update(_dump_unit_dict(field, meta.unit, value))
        else:
            out[yaml_key(field)] = _dump_value(value)
    return out


def _dump_unit(field: dataclasses.Field[Any], unit: str, value: float) -> dict[str, float]:
    shown = units.from_si(value, unit)
    for digits in (6, 9, 12, 15, 17):
        short = float(f"{shown:.{digits}g}")
        if units.to_si(short, unit) == value:
            return {f"{_stem(field)}_{unit}": _plain(short)}
    return {f"{_stem(field)}_{units.dimension(unit)}": value}


def _dump_unit_dict(field: dataclasses.Field[Any], unit: str,
                    value: dict[str, float]) -> dict[str, dict[str, float]]:
    shown = {k: _dump_unit(field, unit, v) for k, v in value.items()}
    canonical = f"{_stem(field)}_{unit}"
    if all(canonical in item for item in shown.values()):
        return {canonical: {k: item[canonical] for k, item in shown.items()}}
    return {f"{_stem(field)}_{units.dimension(unit)}": dict(value)}


def _dump_value(value: object) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dump(value)
    if isinstance(value, dict):
        return {k: _dump_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_dump_value(v) for v in value]
    return value


def _plain(number: float) -> float | int:
    """Keep YAML readable: 300.0 -> 300 when exact (floats parse back from ints exactly)."""
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _join(path: str, key: str) -> str:
    key = key or "''"  # an empty YAML key still gets a visible path
    return f"{path}.{key}" if path else key


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
