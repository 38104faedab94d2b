"""Load scenario and topology files: presets, file references, ``--set`` overrides, parsing.

Loading is: read YAML -> apply overrides by dotted path -> resolve presets and file references into
plain mappings -> parse into frozen specs (:mod:`.schema`) -> cross-section checks. Every failure is
a :class:`SpecError` naming the file (or ``--set``), the key path and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from simcluster import catalog, units, yamlio
from simcluster.errors import SpecError
from simcluster.spec import schema
from simcluster.spec.execution import DEFAULT_FLASH_KERNEL
from simcluster.spec.hardware import TopologySpec
from simcluster.spec.scenario import Scenario

Source = str | Path | Mapping[str, Any]
#: Top-level key of a scenario file that describes a sweep over it (``simcluster sweep``); a single
#: run ignores it.
SWEEP_KEY = "sweep"


def load_scenario(source: Source, overrides: Sequence[str] = ()) -> Scenario:
    """Load, resolve and check a scenario from a file path or a mapping.

    Parameters
    ----------
    source : str, Path or mapping
        A scenario YAML file, or its content as a mapping.
    overrides : sequence of str
        ``KEY=VALUE`` items; KEY is a dotted path (``parallelism.tp``), VALUE is YAML.
    """
    raw, label, base = _read(source)
    raw.pop(SWEEP_KEY, None)  # the sweep section is read by simcluster.sweep (sweep/config.py)
    applied = [apply_override(raw, item) for item in overrides]
    try:
        resolved = resolve_scenario(raw, base)
        return schema.parse(Scenario, resolved)
    except SpecError as err:
        override = next((a for a in applied
                         if err.key == a or err.key.startswith((a + ".", a + "["))), None)
        if override is not None and not err.source:
            raise err.within("--set") from None
        raise err.within(label) from None


def load_topology(source: Source) -> TopologySpec:
    """Load and check a topology from a preset name, a file path or a mapping."""
    if isinstance(source, str) and _is_preset_name(source):
        source = catalog.topology_path(source)
    raw, label, _ = _read(source)
    try:
        return schema.parse(TopologySpec, resolve_topology_mapping(raw, ""))
    except SpecError as err:
        raise err.within(label) from None


def _read(source: Source) -> tuple[dict[str, Any], str, Path]:
    if isinstance(source, Mapping):
        return catalog.deep_copy(dict(source)), "<inline>", Path.cwd()
    path = Path(source)
    return catalog.load_yaml_file(path), str(path), path.parent


def _is_preset_name(text: str) -> bool:
    return not text.endswith((".yaml", ".yml")) and "/" not in text


# ---------------------------------------------------------------------------------- resolution


def resolve_scenario(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """Replace preset names and file references in ``raw`` by complete mappings."""
    out = dict(raw)
    if "model" in out:
        out["model"] = resolve_preset(out["model"], "models", "model")
    if "execution" in out:
        out["execution"] = resolve_stack(out["execution"])
    if "reliability" in out:
        out["reliability"] = resolve_reliability(out["reliability"])
    cluster = out.get("cluster")
    if isinstance(cluster, Mapping) and "topology" in cluster:
        out["cluster"] = {**cluster, "topology": _resolve_topology_ref(cluster["topology"], base)}
    return out


def resolve_stack(value: object) -> object:
    """``execution: NAME`` or ``{stack: NAME, ...}`` -> the stack's flags refined by the keys given.

    A ``--set execution.KEY=...`` on ``execution: NAME`` arrives as ``{preset: NAME, KEY: ...}``.
    """
    if isinstance(value, str):
        value = {"stack": value}
    if not isinstance(value, Mapping):
        return value
    mapping = dict(value)
    if "preset" in mapping and "stack" not in mapping:
        mapping["stack"] = mapping.pop("preset")
    name = mapping.get("stack")
    if name is None:
        return mapping
    if not isinstance(name, str):
        raise SpecError("execution.stack", f"expected a stack preset name, got {name!r}")
    flags = catalog.entry("stacks", name, "execution.stack").get("execution", {})
    return {**flags, **_legacy_flash(mapping, flags)}


def resolve_reliability(value: object) -> object:
    """``reliability: NAME`` or ``{preset: NAME, ...}`` -> the preset's keys refined by those given
    (``simcluster/catalog/reliability.yaml``)."""
    if isinstance(value, str):
        value = {"preset": value}
    if not isinstance(value, Mapping) or value.get("preset") is None:
        return value
    name = value["preset"]
    if not isinstance(name, str):
        raise SpecError("reliability.preset", f"expected a reliability preset name, got {name!r}")
    keys = catalog.entry("reliability", name, "reliability.preset").get("reliability", {})
    return {**keys, **value}


def _legacy_flash(given: dict[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """A ``flash_attention`` given without ``attention`` on a stack picks the kernel: false, the
    unfused ``math``; true, the stack's fused kernel (``flash2`` where the stack's is ``math``)."""
    if "flash_attention" not in given or "attention" in given:
        return given
    flash = given["flash_attention"]
    if not isinstance(flash, bool):
        return given  # the schema reports the wrong type
    stack_kernel = flags.get("attention", DEFAULT_FLASH_KERNEL)
    kernel = ("math" if not flash else
              stack_kernel if stack_kernel != "math" else DEFAULT_FLASH_KERNEL)
    return {**given, "attention": kernel}


def _resolve_topology_ref(value: object, base: Path) -> object:
    if isinstance(value, str) and not _is_preset_name(value):
        path = Path(value) if Path(value).is_absolute() else base / value
        return schema.dump(load_topology(path))
    if isinstance(value, str):
        return schema.dump(load_topology(value))
    if isinstance(value, Mapping):
        merged = resolve_preset(value, "topologies", "cluster.topology")
        return resolve_topology_mapping(merged if isinstance(merged, Mapping) else value,
                                        "cluster.topology")
    raise SpecError("cluster.topology",
                    f"expected a preset name, a file path or a mapping, got {value!r}")


def resolve_topology_mapping(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    """Resolve the accelerator preset inside a topology mapping."""
    out = dict(raw)
    if "accelerator" in out:
        where = f"{key}.accelerator" if key else "accelerator"
        out["accelerator"] = resolve_preset(out["accelerator"], "accelerators", where)
    return out


def resolve_preset(value: object, kind: str, key: str) -> object:
    """A preset name -> its entry; a mapping with ``preset:`` -> the entry deep-merged with it."""
    if isinstance(value, str):
        return catalog.entry(kind, value, key)
    if not isinstance(value, Mapping) or "preset" not in value:
        return value
    name = value["preset"]
    if not isinstance(name, str):
        raise SpecError(f"{key}.preset", f"expected a preset name, got {name!r}")
    rest = {k: v for k, v in value.items() if k != "preset"}
    base = catalog.entry(kind, name, f"{key}.preset")
    if kind == "topologies":
        base.pop("schema", None)
        rest.setdefault("name", f"{name}+custom" if rest else name)
    return deep_merge(base, rest)


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``top``; nested mappings are merged, everything else replaced."""
    out = dict(base)
    for key, value in top.items():
        for other in _same_quantity(base, key):
            out.pop(other, None)  # latency_ms refines a preset's latency_us: one quantity, any unit
        old = out.get(key)
        if isinstance(old, str) and isinstance(value, Mapping) and "preset" not in value:
            out[key] = {"preset": old, **value}  # refine a nested preset (an accelerator name)
        elif isinstance(old, Mapping) and isinstance(value, Mapping) and "preset" not in value:
            out[key] = deep_merge(old, value)
        else:
            out[key] = value
    return out


def _same_quantity(mapping: Mapping[str, Any], key: object) -> list[str]:
    """Keys of ``mapping`` other than ``key`` naming the same quantity in another unit."""
    split = units.split_suffix(key) if isinstance(key, str) else None
    if split is None:
        return []
    stem, dim = split[0], units.dimension(split[1])
    found = []
    for other in mapping:
        other_split = units.split_suffix(other) if isinstance(other, str) else None
        if (other != key and other_split is not None and other_split[0] == stem
                and units.dimension(other_split[1]) == dim):
            found.append(other)
    return found


# ----------------------------------------------------------------------------------- overrides


def apply_override(doc: dict[str, Any], item: str) -> str:
    """Apply ``KEY=VALUE`` to ``doc`` in place; returns the dotted KEY.

    A preset name met on the way (``model: gpt3-175b`` with ``model.layers=48``) becomes
    ``{preset: gpt3-175b}`` so the override refines the preset.
    """
    key, sep, text = item.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(parts):
        raise SpecError("", f"expected KEY=VALUE with a dotted KEY, got {item!r}", "--set")
    try:
        value = yamlio.load(text)
    except yaml.YAMLError:
        raise SpecError(key, f"value {text!r} is not valid YAML", "--set") from None
    node: dict[str, Any] = doc
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif isinstance(child, str):
            child = node[part] = {"preset": child}
        elif not isinstance(child, dict):
            where = ".".join(parts[: depth + 1])
            raise SpecError(where, f"is {child!r}, not a mapping; cannot set {key}", "--set")
        node = child
    node[parts[-1]] = value
    return key


# --------------------------------------------------------------------------------------- dump


def dump_scenario(scenario: Scenario) -> dict[str, Any]:
    """The fully resolved scenario as a plain mapping (every default filled in)."""
    return schema.dump(scenario)


def to_yaml(data: Mapping[str, Any]) -> str:
    """YAML text of a plain mapping, keys in declaration order."""
    return yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=False, width=100)

