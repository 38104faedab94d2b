"""Lazy package exports (PEP 562): names imported from their modules on first access.

``simcluster`` and ``simcluster.sim`` export their API this way, so importing the command line, or
the closed-form engine's helpers, does not import numpy, networkx or SimPy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``.

    ``exports`` maps each exported name to the module defining it; a name once imported is stored
    in the package's ``namespace`` (its ``globals()``), so later accesses are plain lookups.
    """

    def getattr_(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *exports])

    return getattr_, dir_
