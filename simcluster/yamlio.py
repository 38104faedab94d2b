"""YAML reading with YAML 1.2 numbers and no duplicate keys.

PyYAML follows YAML 1.1, whose float pattern needs a dot and a signed exponent, so ``tokens: 1e12``
would silently load as a string. :class:`Loader` replaces that resolver. It is built on libyaml's C
parser (``yaml.CSafeLoader``) when PyYAML has it, else on the pure-Python ``SafeLoader``; scalar
resolution and construction are the same Python code in both, so the results are identical.

A mapping that repeats a key (``tp: 2`` twice) raises :class:`DuplicateKeyError` with the dotted key
path, instead of YAML's silent "last one wins".
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_BASE: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DuplicateKeyError(yaml.YAMLError):
    """A mapping gives the same key twice; ``path`` is its dotted key path, ``line`` 1-based."""

    def __init__(self, path: str, line: int, first_line: int) -> None:
        self.path = path
        self.line = line
        self.first_line = first_line
        super().__init__(f"duplicate key {path!r} at line {line} (first given at line {first_line})")


class Loader(_BASE):  # type: ignore[valid-type,misc]
    """Safe loader with YAML 1.2 float resolution that rejects duplicate mapping keys."""

    def construct_document(self, node: yaml.Node) -> Any:
        """Check the whole node tree for repeated keys, then construct as usual."""
        _check_duplicates(node, "")
        return super().construct_document(node)


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


def _check_duplicates(node: yaml.Node, path: str) -> None:
    """Raise :class:`DuplicateKeyError` for the first mapping that repeats a scalar key."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                where = f"{path}.{key.value}" if path else str(key.value)
                line = key.start_mark.line + 1
                if key.value in seen:
                    raise DuplicateKeyError(where, line, seen[key.value])
                seen[key.value] = line
                _check_duplicates(value, where)
            else:
                _check_duplicates(value, path)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicates(item, f"{path}[{i}]")


def load(text: str | bytes) -> Any:
    """Parse YAML text with :class:`Loader`."""
    return yaml.load(text, Loader=Loader)
