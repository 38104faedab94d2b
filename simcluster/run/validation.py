"""How well a prediction is validated: the published runs that cover its accelerator x software
stack x precision x model family, and how far simcluster's closed form is from them.

The coverage is ``simcluster/catalog/validation.yaml``, generated from the validation tests' rows
(``python -m tests.validation.coverage``; ``tests/validation/test_coverage.py`` re-predicts every
row). A setting no published run covers is "not validated", with the nearest one that is
(docs/validation.md, "Coverage").
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from simcluster import catalog
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.scenario import Scenario

#: The key of a setting, and how much each field weighs when looking for the nearest validated one
#: (the same part first, then its architecture, precision and stack, then the model family).
KEYS = ("accelerator", "stack", "precision", "family", "sharding")
WEIGHTS = {"accelerator": 8, "arch": 4, "precision": 2, "stack": 2, "family": 1, "sharding": 1}


def setting(s: Scenario) -> dict[str, str]:
    """The validation key of a scenario (``tests/validation/coverage.py`` uses the same): the
    part and its architecture, the stack preset (``-``: none), the precision, dense or MoE, and
    whether the parameters are sharded (ZeRO-3 / FSDP gathers them per layer) or replicated."""
    acc = s.cluster.topology.accelerator
    return {"accelerator": acc.name, "arch": acc.arch or "-", "stack": s.execution.stack or "-",
            "precision": s.precision, "family": "moe" if s.model.moe else "dense",
            "sharding": "zero3" if s.parallelism.zero_stage == 3 else "replicated"}


@cache
def coverage() -> tuple[dict[str, Any], ...]:
    """Every (setting, source) entry of the packaged coverage (read once; do not modify)."""
    return tuple(catalog.load_packaged("validation")["settings"])


def _sources(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"source": e["source"], "rows": e["rows"], "median_abs_error": e["median_abs_error"],
             "p90_abs_error": e["p90_abs_error"], "mean_error": e["mean_error"]} for e in entries]


def _score(entry: dict[str, Any], key: dict[str, str]) -> tuple[int, int]:
    return (sum(w for k, w in WEIGHTS.items() if entry[k] == key[k]), entry["rows"])


def nearest(key: dict[str, str], entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries of the covered setting closest to ``key`` (all of its sources)."""
    best = max(entries, key=lambda e: _score(e, key))
    return [e for e in entries if all(e[k] == best[k] for k in KEYS)]


def gemm_basis(acc: AcceleratorSpec, precision: str) -> str:
    """What the accelerator's GEMM rate rests on: a tile/wave model fitted on a GEMM sweep, or a
    best-shape efficiency with a size factor (docs/catalog.md)."""
    if acc.gemm_tiles is not None:
        return "GEMMs: tile/wave model fitted on a published GEMM sweep (docs/catalog.md)"
    eff = acc.matmul_efficiency.get(precision, acc.matmul_efficiency.get("bf16"))
    level = f"{eff:.2f} of peak" if eff is not None else "no measured level"
    return (f"GEMMs: best-shape efficiency {level} with a size factor, no tile model fitted on a "
            "GEMM sweep of this part")


def validation_block(s: Scenario) -> dict[str, Any]:
    """The ``validation`` output field: status, setting, sources and their errors, the nearest
    validated setting when this one is not, and what the GEMM rate rests on."""
    return block_for(setting(s), gemm_basis(s.cluster.topology.accelerator, s.precision))


def block_for(key: dict[str, str], gemm: str) -> dict[str, Any]:
    """:func:`validation_block` of a setting ``key`` (:func:`setting`); the result is shared
    between calls with the same key (a sweep asks once per layout): do not modify it."""
    return _block(tuple(key[k] for k in (*KEYS, "arch")), gemm)


@cache
def _block(fields: tuple[str, ...], gemm: str) -> dict[str, Any]:
    key = dict(zip((*KEYS, "arch"), fields, strict=True))
    entries = coverage()
    exact = [e for e in entries if all(e[k] == key[k] for k in KEYS)]
    near = [] if exact else nearest(key, entries)
    return {
        "status": "validated" if exact else "not validated",
        "setting": {k: key[k] for k in KEYS},
        "sources": _sources(exact),
        "nearest": None if exact else {"setting": {k: near[0][k] for k in KEYS},
                                       "sources": _sources(near)},
        "gemm": gemm,
    }
