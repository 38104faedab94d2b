"""Packaged preset data: accelerators, models and software stacks (YAML in this folder) and
topology files.

Topology presets have one home, the top-level ``topologies/`` folder. A wheel carries it as
``simcluster/_data/topologies``; a source checkout (editable install) reads it in place.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from simcluster import yamlio
from simcluster.errors import SpecError

KINDS = ("accelerators", "attention", "models", "reliability", "stacks", "topologies")
_SINGULAR = {"accelerators": "accelerator", "attention": "attention kernel", "models": "model",
             "reliability": "reliability", "stacks": "software-stack", "topologies": "topology"}


@cache
def _catalog(kind: str) -> dict[str, dict[str, Any]]:
    entries = _packaged(kind).get(kind, {})
    return {str(k): v for k, v in entries.items()}


def load_packaged(name: str) -> dict[str, Any]:
    """A copy of the whole packaged ``{name}.yaml`` (data files with top-level keys besides their
    entries, such as ``attention.yaml``'s ``seq_len``)."""
    copied: dict[str, Any] = deep_copy(_packaged(name))
    return copied


@cache
def _packaged(name: str) -> dict[str, Any]:
    text = resources.files("simcluster.catalog").joinpath(f"{name}.yaml").read_text("utf-8")
    data = yamlio.load(text)
    return data if isinstance(data, dict) else {}


def topology_dir() -> Path:
    """The folder of topology presets (packaged copy first, then the source checkout)."""
    packaged = Path(str(resources.files("simcluster"))) / "_data" / "topologies"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "topologies"


def names(kind: str) -> list[str]:
    """Sorted preset names of ``kind`` (accelerators, models or topologies)."""
    if kind == "topologies":
        return sorted(p.stem for p in topology_dir().glob("*.yaml"))
    return sorted(_catalog(kind))


def entries(kind: str) -> dict[str, dict[str, Any]]:
    """A copy of every entry of the packaged ``{kind}.yaml`` (including ``collectives``), by name.

    Like :func:`entry`, the caller may change what it gets: the parsed file is never handed out.
    """
    copied: dict[str, dict[str, Any]] = deep_copy(_catalog(kind))
    return copied


def entry(kind: str, name: str, key: str = "") -> dict[str, Any]:
    """A copy of preset ``name`` of ``kind``; ``SpecError`` at ``key`` when there is none."""
    if kind == "topologies":
        return load_yaml_file(topology_path(name, key))
    found = _catalog(kind).get(name)
    if not isinstance(found, dict):
        raise unknown(kind, name, key)
    copied: dict[str, Any] = deep_copy({"name": name, **found})
    return copied


def topology_path(name: str, key: str = "") -> Path:
    """The file of topology preset ``name``."""
    path = topology_dir() / f"{name}.yaml"
    if not path.is_file():
        raise unknown("topologies", name, key)
    return path


def unknown(kind: str, name: str, key: str) -> SpecError:
    """The error for a preset name that is not in the catalog, with the closest names."""
    close = difflib.get_close_matches(name, names(kind), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return SpecError(key, f"unknown {_SINGULAR.get(kind, kind)} preset {name!r}{hint}; "
                     f"see 'simcluster catalog {kind}'")


#: Largest YAML file read: shipped scenarios and topologies are 1-10 kB, so 4 MiB is far above any
#: real file and far below what would take the parser seconds (a 23 MB file took 57 s).
MAX_FILE_BYTES = 4 << 20


def load_yaml_file(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; ``SpecError`` naming the file for unreadable or non-mapping content.

    Parsed files are cached by path, modification time and size; every call returns a fresh copy,
    so a caller may change it freely.
    """
    try:
        stat = path.stat()
    except OSError as err:
        raise SpecError("", f"cannot read: {err.strerror}", str(path)) from None
    if stat.st_size > MAX_FILE_BYTES:  # refused before it is read or parsed
        raise SpecError("", f"{stat.st_size:,} bytes; a scenario or topology file is at most "
                        f"{MAX_FILE_BYTES:,} bytes (the largest shipped is a few kB)", str(path))
    copied: dict[str, Any] = deep_copy(_parsed_file(str(path), stat.st_mtime_ns, stat.st_size))
    return copied


@lru_cache(maxsize=256)
def _parsed_file(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    """The parsed mapping of ``path`` at one (mtime, size): a cache entry, never handed out."""
    del mtime_ns, size  # cache key only
    try:
        raw = Path(path).read_bytes()
        text = raw.decode("utf-8")
    except OSError as err:
        raise SpecError("", f"cannot read: {err.strerror}", path) from None
    except UnicodeDecodeError as err:
        raise SpecError("", f"not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start}); "
                        "expected a YAML file", path) from None
    try:
        data = yamlio.load(text)
    except yamlio.DuplicateKeyError as err:
        raise SpecError(err.path, f"given twice (lines {err.first_line} and {err.line}); "
                        "each key may appear once", path) from None
    except yaml.YAMLError as err:
        raise SpecError("", f"not valid YAML: {_yaml_problem(err)}", path) from None
    if not isinstance(data, dict):
        raise SpecError("", f"expected a mapping at the top, got {type(data).__name__}", path)
    return data


def deep_copy(value: Any) -> Any:
    """A copy of plain YAML data (mappings and lists copied, scalars shared)."""
    if isinstance(value, Mapping):
        return {k: deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep_copy(v) for v in value]
    return value


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else str(problem)
