"""Flat result rows: their column order and column types, shared by the runner and the store.

A sweep's result is a list of flat rows (``dict`` of ``str`` to ``str | int | float | bool | None``).
The table they become has one column per key, in a fixed order (the first row's keys, then new
keys in order of appearance) and one type per column:

========================  ============
values (``None`` aside)   column type
========================  ============
none at all               null
``bool`` only             bool
``int`` only              int64
``int`` and ``float``     float64
``str`` only              string
========================  ============

Any other mix (``bool`` with a number, ``str`` with a number, a numpy scalar) is a bug of the task
that made the rows, raised as :class:`~simcluster.errors.InvariantError` naming the column.
:func:`normalize_rows` gives every row of a chunk the same keys and the same Python types as the
chunk reads back from its Parquet part, so a resumed sweep returns exactly the rows of an
uninterrupted one. Pure Python: worker processes import this module without pyarrow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any

from simcluster.errors import InvariantError

Row = dict[str, str | int | float | bool | None]


class Kind(Enum):
    """The type of a result column."""

    NULL = "null"
    BOOL = "bool"
    INT = "int64"
    FLOAT = "float64"
    STRING = "string"


_NONE = type(None)
_KINDS: dict[frozenset[type], Kind] = {
    frozenset(): Kind.NULL, frozenset({bool}): Kind.BOOL, frozenset({int}): Kind.INT,
    frozenset({float}): Kind.FLOAT, frozenset({int, float}): Kind.FLOAT, frozenset({str}): Kind.STRING}


def column_names(rows: Iterable[Row]) -> list[str]:
    """The first row's keys, then each new key in order of appearance."""
    names: dict[str, None] = {}
    last: Any = None
    for row in rows:
        keys = row.keys()
        if keys != last:  # set comparison: rows sharing the previous row's keys add nothing
            names.update(dict.fromkeys(keys))
            last = keys
    return list(names)


def checked_column_names(rows: list[Row]) -> list[str]:
    """:func:`column_names`, refusing rows without any column (a table could not keep them)."""
    names = column_names(rows)
    if rows and not names:
        raise InvariantError(f"sweep rows: {len(rows)} rows without any column")
    return names


def column_kind(name: str, values: Sequence[Any]) -> Kind:
    """The type of column ``name`` holding ``values`` (see the module docstring)."""
    types = set(map(type, values))
    types.discard(_NONE)
    kind = _KINDS.get(frozenset(types))
    if kind is None:
        held = ", ".join(sorted(t.__qualname__ for t in types))
        raise InvariantError(f"sweep rows: column {name!r} holds {held}; a column holds one of "
                             "str, int, float (ints and floats mix as float), bool or None")
    return kind


def normalize_rows(rows: list[Row]) -> list[Row]:
    """``rows`` with every key of the chunk in column order (``None`` where missing) and ints
    made floats in columns that mix ints and floats; the types are checked (:func:`column_kind`).

    Rows already in that shape are updated in place (they are the caller's fresh rows).
    """
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise InvariantError(f"a sweep task returns a list of dict rows, got {type(rows).__name__}")
    names = checked_column_names(rows)
    rows = [row if list(row) == names else {name: row.get(name) for name in names} for row in rows]
    for name in names:
        values = [row[name] for row in rows]
        if column_kind(name, values) is Kind.FLOAT:
            _floats(name, rows, values)
    return rows


def _floats(name: str, rows: list[Row], values: list[Any]) -> None:
    """Make the ints of float column ``name`` floats (as the Parquet part reads back)."""
    for row, value in zip(rows, values, strict=True):
        if type(value) is int:
            row[name] = float(value)
