"""Importing a script of ``analysis/`` or ``benchmarks/`` (not a package) by its folder."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def import_script(folder: str, name: str) -> ModuleType:
    """The module ``name`` of ``ROOT/folder``, imported with that folder on ``sys.path`` only
    while importing (its own sibling imports, such as ``_inputs``, resolve)."""
    path = str(ROOT / folder)
    sys.path.insert(0, path)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(path)
