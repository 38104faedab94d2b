"""Hypothesis strategies for the CLI fuzz test (``test_cli_fuzz.py``): shipped files, mutated.

A mutant is a shipped scenario or topology file, either as written or fully resolved by the loader
(every default spelt out, so every key is in reach), with one to three mutations:

* ``set``: a value replaced by a hostile one (zero, negative, NaN, inf, 1e40, 10**40, a huge or tiny
  multiple of the old value, a string, a number written as a string or with a unit, null, a list, a
  mapping);
* ``delete``: a key removed (required keys included);
* ``rename``: a key misspelt, or its unit suffix swapped for another unit or dropped;
* ``nest``: a value wrapped in a list or a mapping, a mapping turned into a list;
* ``typo``: a string value (an enumeration, a preset name) misspelt;
* ``add``: a key the file omits but the schema knows (taken from the resolved form), or an unknown
  key, with a hostile value.

Text mutations act on the bytes of the file instead: binary content, a non-UTF-8 byte, truncation,
a duplicated key, tabs, deep nesting, and a YAML alias bomb.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from simcluster import units, yamlio
from simcluster.spec import schema
from simcluster.spec.loader import dump_scenario, load_scenario, load_topology

ROOT = Path(__file__).resolve().parents[2]
FILE = "<file>"  # stands in the argv of a Case for the path the mutant is written to

Key = str | int
KeyPath = tuple[Key, ...]
Doc = dict[Any, Any]


@dataclass(frozen=True)
class Case:
    """One CLI call: ``argv`` (with ``FILE`` for the mutant's path), the file's bytes, the mutations."""

    argv: tuple[str, ...]
    content: bytes
    steps: tuple[str, ...]

    def __repr__(self) -> str:
        return f"Case(simcluster {' '.join(self.argv)}; {'; '.join(self.steps) or 'unmutated'})"


# ----------------------------------------------------------------------------------- base files


@functools.cache
def _raw(path: Path) -> Doc:
    doc = yamlio.load(path.read_text())
    assert isinstance(doc, dict), path
    return doc


@functools.cache
def _resolved(path: Path) -> Doc:
    if path.parent.name == "topologies":
        return schema.dump(load_topology(path))
    return dump_scenario(load_scenario(path))


def base_doc(path: Path, resolved: bool) -> Doc:
    """A fresh copy of a shipped file, as written or fully resolved."""
    return copy.deepcopy(_resolved(path) if resolved else _raw(path))


def with_reliability(path: Path) -> Doc:
    """A shipped scenario with the reliability and checkpoint sections of the 1k-H100 scenario (its
    own where it has them)."""
    own = _raw(path)
    if "reliability" in own:
        return copy.deepcopy(own)
    donor = _raw(ROOT / "scenarios" / "1k-h100-reliability.yaml")
    return {**copy.deepcopy(_raw(path)), "reliability": copy.deepcopy(donor["reliability"]),
            "checkpoint": copy.deepcopy(donor["checkpoint"])}


def to_bytes(doc: object) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode()


# ---------------------------------------------------------------------------------- key paths


def key_paths(doc: object, prefix: KeyPath = ()) -> list[KeyPath]:
    """The path of every value under ``doc`` (mapping keys and list indices), outermost first."""
    items: list[tuple[Key, object]]
    if isinstance(doc, dict):
        items = list(doc.items())
    elif isinstance(doc, list):
        items = list(enumerate(doc))
    else:
        return []
    out: list[KeyPath] = []
    for key, value in items:
        out.append((*prefix, key))
        out.extend(key_paths(value, (*prefix, key)))
    return out


def dotted(path: KeyPath) -> str:
    return ".".join(str(k) for k in path) or "<root>"


def _parent(doc: Doc, path: KeyPath) -> Any:
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    return node


def set_path(doc: Doc, path: KeyPath, value: object) -> None:
    """Set ``path`` to ``value``, creating mappings on the way (a preset name becomes ``{preset:}``)."""
    node: Any = doc
    for key in path[:-1]:
        if isinstance(node, list):
            if not isinstance(key, int) or not -len(node) <= key < len(node):
                return  # an earlier mutation made this a list: the path no longer exists
            node = node[key]
            continue
        child = node.get(key)
        if isinstance(child, str):
            child = node[key] = {"preset": child}
        elif not isinstance(child, dict | list):
            child = node[key] = {}
        node = child
    if isinstance(node, list) and not isinstance(path[-1], int):
        return
    node[path[-1]] = value


# ------------------------------------------------------------------------------ hostile values

EXTREME = (0, 0.0, -1, 1, 1e-9, 0.001, 1e9, 1e40, 10**40, 2**63, 4194304, float("nan"), float("inf"),
           float("-inf"))

HOSTILE: tuple[object, ...] = (*EXTREME, -0.0, True, None, "", "x", "1e3", "12 GB", "450GBps", "nan", [], {},
                               [1, 2], {"a": 1})


def hostile_values() -> st.SearchStrategy[object]:
    """Hostile values of every type (copies: a later mutation may write into a list or mapping)."""
    return st.one_of(st.sampled_from(HOSTILE).map(copy.deepcopy), st.integers(-(2**70), 2**70),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@st.composite
def extreme_number(draw: st.DrawFn, old: float) -> float:
    """A number of the right type that is zero, tiny, huge, not finite, or the old one scaled."""
    how = draw(st.sampled_from(["scale", "scale", "special", "negate", "near"]))
    if how == "scale":
        scaled = old * 10.0 ** draw(st.sampled_from([-9, -6, -3, -1, 1, 2, 3, 6, 9, 40]))
        return int(scaled) if isinstance(old, int) and abs(scaled) < 2**64 else scaled
    if how == "special":
        return draw(st.sampled_from(EXTREME))
    if how == "negate":
        return -old
    return old + draw(st.sampled_from([-1, 1, 0.5]))


@st.composite
def hostile_for(draw: st.DrawFn, old: object) -> object:
    """A hostile value, often derived from the old one (scaled by a power of ten, negated, as text)."""
    if isinstance(old, int | float) and not isinstance(old, bool) and draw(st.booleans()):
        how = draw(st.sampled_from(["scale", "negate", "string", "unit"]))
        if how == "scale":
            return old * 10.0 ** draw(st.sampled_from([-9, -3, 3, 6, 9, 40]))
        if how == "negate":
            return -old
        return str(old) if how == "string" else f"{old} {draw(st.sampled_from(['GB', 's', 'x']))}"
    return draw(hostile_values())


@st.composite
def typo(draw: st.DrawFn, text: str) -> str:
    """``text`` misspelt: a character dropped, doubled, swapped or changed, a case flip, an extra s."""
    if not text:
        return "x"
    i = draw(st.integers(0, len(text) - 1))
    how = draw(st.sampled_from(["drop", "double", "swap", "change", "upper", "plural"]))
    if how == "drop":
        return text[:i] + text[i + 1:] or "x"
    if how == "double":
        return text[:i] + text[i] + text[i:]
    if how == "swap" and i + 1 < len(text):
        return text[:i] + text[i + 1] + text[i] + text[i + 2:]
    if how == "upper":
        return text.upper() if text.upper() != text else text.lower()
    if how == "plural":
        return text + "s"
    return text[:i] + draw(st.sampled_from("aez_-09")) + text[i + 1:]


@st.composite
def misspelt_key(draw: st.DrawFn, key: str) -> str:
    """A typo, or the unit suffix swapped for another unit (any dimension) or dropped or added."""
    split = units.split_suffix(key)
    how = draw(st.sampled_from(["typo", "unit"]))
    if how == "typo":
        return draw(typo(key))
    suffix = draw(st.sampled_from([*units.SUFFIXES, "Gbit", "GiBps", "sec"]))
    if split is None:
        return f"{key}_{suffix}"
    stem = split[0]
    return draw(st.sampled_from([stem, f"{stem}_{suffix}"]))


# ---------------------------------------------------------------------------------- mutations


@st.composite
def mutate(draw: st.DrawFn, doc: Doc, known: Sequence[KeyPath], focus: Sequence[str] = ()) -> str:
    """Apply one mutation to ``doc`` in place; return its description. Half the time, a ``focus``
    (top-level keys) confines it to those sections."""
    paths = key_paths(doc)
    focused = [p for p in paths if p[0] in focus]
    if draw(st.booleans()) and focused:
        paths = focused
    numbers = [p for p in paths if _is_number(_parent(doc, p)[p[-1]])]
    kind = draw(st.sampled_from(["number"] * 4 + ["set", "set", "delete", "rename", "nest", "typo", "add"]))
    if kind == "add" or not paths:
        return _add(draw, doc, known)
    if kind == "number" and numbers:
        path = draw(st.sampled_from(numbers))
        value = _parent(doc, path)[path[-1]] = draw(extreme_number(_parent(doc, path)[path[-1]]))
        return f"set {dotted(path)} = {value!r}"
    path = draw(st.sampled_from(paths))
    parent, key = _parent(doc, path), path[-1]
    old = parent[key]
    if kind == "delete" and isinstance(parent, dict):
        del parent[key]
        return f"delete {dotted(path)}"
    if kind == "rename" and isinstance(key, str):
        new = draw(misspelt_key(key))
        parent[new] = parent.pop(key)
        return f"rename {dotted(path)} -> {new}"
    if kind == "typo" and isinstance(old, str):
        parent[key] = draw(typo(old))
        return f"typo {dotted(path)}: {old!r} -> {parent[key]!r}"
    if kind == "nest":
        parent[key] = _nested(draw, old)
        return f"nest {dotted(path)} -> {parent[key]!r}"
    parent[key] = draw(hostile_for(old))
    return f"set {dotted(path)} = {parent[key]!r}"


def _nested(draw: st.DrawFn, old: object) -> object:
    if isinstance(old, dict) and draw(st.booleans()):
        return [[k, v] for k, v in old.items()] if draw(st.booleans()) else list(old.values())
    if isinstance(old, list) and draw(st.booleans()):
        return dict(enumerate(old))
    return [old] if draw(st.booleans()) else {"value": old}


def _add(draw: st.DrawFn, doc: Doc, known: Sequence[KeyPath]) -> str:
    paths = key_paths(doc)  # a list, not a set: the order of examples must not depend on hashing
    present = set(paths)
    absent = [p for p in known if p not in present and all(isinstance(k, str) for k in p)]
    if draw(st.booleans()) and absent:
        path = draw(st.sampled_from(absent))
    else:
        inner: list[KeyPath] = [p for p in paths if isinstance(_parent(doc, p), dict)] or [("x",)]
        path = (*draw(st.sampled_from(inner))[:-1], draw(st.sampled_from(["x", "extra_GBps", "nodes"])))
    value = draw(hostile_values())
    set_path(doc, path, value)
    return f"add {dotted(path)} = {value!r}"


@functools.cache
def _known(path: Path, reliability: bool) -> tuple[KeyPath, ...]:
    """Every key path of the resolved file: the keys an ``add`` mutation may bring in."""
    if reliability:
        return tuple(key_paths(dump_scenario(load_scenario(with_reliability(path)))))
    return tuple(key_paths(_resolved(path)))


@st.composite
def mutated(draw: st.DrawFn, sources: Sequence[Path], *, reliability: bool = False,
            max_steps: int = 3, focus: Sequence[str] = ()) -> tuple[bytes, tuple[str, ...]]:
    """The bytes of one shipped file (given reliability sections if asked) after 1 to ``max_steps``
    mutations, and their descriptions."""
    path = draw(st.sampled_from(sources))
    resolved = not reliability and draw(st.booleans())
    doc = with_reliability(path) if reliability else base_doc(path, resolved)
    steps = [f"{path.relative_to(ROOT)}{' resolved' if resolved else ''}"]
    for _ in range(draw(st.integers(1, max_steps))):
        steps.append(draw(mutate(doc, _known(path, reliability), focus)))
    return to_bytes(doc), tuple(steps)


# ------------------------------------------------------------------------------ text mutations


def alias_bomb(depth: int) -> str:
    """A YAML list of 10**(depth+1) ones written in a few hundred bytes (anchors and aliases)."""
    text = "&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"
    for k in range(1, depth + 1):
        text = f"&a{k} [{text}, " + ", ".join([f"*a{k - 1}"] * 9) + "]"
    return text


@st.composite
def corrupted(draw: st.DrawFn, sources: Sequence[Path]) -> tuple[bytes, tuple[str, ...]]:
    """The bytes of one shipped file damaged at the text level."""
    path = draw(st.sampled_from(sources))
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    at = draw(st.integers(0, len(text)))
    how = draw(st.sampled_from(["binary", "byte", "utf16", "truncate", "duplicate", "tab", "deep",
                                "bomb", "empty", "scalar"]))
    label = f"{path.relative_to(ROOT)}: {how}"
    if how == "binary":
        return draw(st.binary(min_size=1, max_size=64)), (label,)
    if how == "byte":
        byte = draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xe9", b"\x80"]))
        return text[:at].encode() + byte + text[at:].encode(), (f"{label} {byte!r} at {at}",)
    if how == "utf16":
        return text.encode("utf-16"), (label,)
    if how == "truncate":
        return text[:at].encode(), (f"{label} at {at}",)
    if how == "duplicate":
        top = [ln for ln in lines if ln[:1].isalpha()] or ["seed: 0\n"]
        line = draw(st.sampled_from(top))
        return (text + line).encode(), (f"{label} {line.strip()!r}",)
    if how == "tab":
        return text.replace("  ", "\t").encode(), (label,)
    if how == "deep":
        depth = draw(st.sampled_from([100, 10_000, 100_000]))
        return (text + f"x: {'[' * depth}{']' * depth}\n").encode(), (f"{label} {depth}",)
    if how == "bomb":
        key = draw(st.sampled_from(["parallelism:\n  stage_layers", "name", "bomb", "model",
                                    "perturbations:\n  gpu_slowdown"]))
        drop = key.split(":")[0]
        kept = "".join(ln for ln in lines if not ln.startswith(drop + ":"))
        return (kept + f"{key}: {alias_bomb(8)}\n").encode(), (f"{label} at {key.split()[-1]}",)
    if how == "empty":
        return b"", (label,)
    return draw(st.sampled_from([b"- a\n- b\n", b"42\n", b"null\n", b"'text'\n"])), (label,)
