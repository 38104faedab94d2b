"""YAML reading with YAML 1.2 numbers: ``1e12`` and ``3.0e11`` are floats, not strings.

PyYAML follows YAML 1.1, whose float pattern needs a dot and a signed exponent, so ``tokens: 1e12``
would silently load as a string. :class:`Loader` replaces that resolver.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class Loader(yaml.SafeLoader):
    """Safe loader with YAML 1.2 float resolution."""


_FLOAT_12 = re.compile(
    r"""^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.VERBOSE,
)

Loader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))
# Integers still resolve first (their resolver is registered earlier for the same characters).


def load(text: str) -> Any:
    """Parse YAML text with :class:`Loader`."""
    return yaml.load(text, Loader=Loader)
