"""The base scenario of a sweep setting: the file with its overrides, loaded by the loader.

A layout search only keeps the model, the cluster and the global batch of the file's layout, yet
``load_scenario`` checks the file's layout too, and a setting that changes the GPU count (``--vary
cluster.nodes=...``) can make it invalid (``global_batch`` no longer divisible by ``dp``). For a
search, :func:`load_base` therefore falls back to the simplest layouts in turn (pipeline only,
then tensor only, over the divisors of the GPU count) until one loads; only when none does is the
file's own error raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.spec import load_scenario, schema
from simcluster.spec.loader import apply_override, resolve_scenario
from simcluster.spec.model import ModelSpec
from simcluster.spec.scenario import ClusterSpec, Scenario
from simcluster.sweep.space import MAX_SEARCH_GPUS, divisors, stage_layers_for

Source = str | Path | Mapping[str, Any]
_SIMPLE = {"cp": 1, "ep": 1, "expert_tp": None, "micro_batch": 1, "schedule": "1f1b", "virtual_stages": 1,
           "zero_stage": 0, "offload": "none", "sequence_parallel": False, "recompute": "none"}


def load_base(source: Source, overrides: Sequence[str], search: bool) -> Scenario:
    """``source`` with ``overrides``; for a ``search``, any loadable layout (see the module doc)."""
    try:
        return load_scenario(source, overrides)
    except SpecError as err:
        if not search or not err.key.startswith("parallelism"):
            raise
        first = err
    gpus, layers = _gpus_and_layers(source, overrides)
    if gpus > MAX_SEARCH_GPUS:
        raise first
    for n in divisors(gpus):
        for tp, pp in ((1, n), (n, 1)):
            if pp > layers:
                continue
            stage_layers = stage_layers_for(layers, pp, 1)
            simple = {**_SIMPLE, "tp": tp, "pp": pp, "stage_layers": stage_layers,
                      "tp_across_nodes": tp > 1, "sequence_parallel": tp > 1}
            items = [*overrides, *(f"parallelism.{k}={_yaml(v)}" for k, v in simple.items())]
            try:
                return load_scenario(source, items)
            except SpecError:
                continue
    raise first


def _yaml(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def _gpus_and_layers(source: Source, overrides: Sequence[str]) -> tuple[int, int]:
    """GPU count and layers of ``source`` (both loaded by the loader's own parsers)."""
    if isinstance(source, Mapping):
        raw, base = catalog.deep_copy(dict(source)), Path.cwd()
    else:
        raw, base = catalog.load_yaml_file(Path(source)), Path(source).parent
    raw.pop("sweep", None)
    for item in overrides:
        apply_override(raw, item)
    resolved = resolve_scenario(raw, base)
    cluster = schema.parse(ClusterSpec, resolved.get("cluster"), "cluster")
    model = schema.parse(ModelSpec, resolved.get("model"), "model")
    return cluster.gpus, model.layers
