"""YAML reading with YAML 1.2 numbers and no duplicate keys.

PyYAML follows YAML 1.1, whose float pattern needs a dot and a signed exponent, so ``tokens: 1e12``
would silently load as a string. :class:`Loader` replaces that resolver. It is built on libyaml's C
parser (``yaml.CSafeLoader``) when PyYAML has it, else on the pure-Python ``SafeLoader``; scalar
resolution and construction are the same Python code in both, so the results are identical.

A mapping that repeats a key (``tp: 2`` twice) raises :class:`DuplicateKeyError` with the dotted key
path, instead of YAML's silent "last one wins". A document whose expanded tree is larger than
:data:`MAX_NODES` nodes (an alias "bomb": a few lines of anchors that expand to a billion
elements), deeper than :data:`MAX_DEPTH` levels, or recursive (an alias inside its own anchor)
raises :class:`DocumentShapeError` before anything is constructed, so no input makes the loader
hang or overflow the stack.
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


#: Most nodes a document may expand to (a scenario has a few hundred).
MAX_NODES = 100_000
#: Deepest nesting a document may have (a scenario nests four or five levels).
MAX_DEPTH = 64


class DocumentShapeError(yaml.YAMLError):
    """The document is too large once its aliases are expanded, too deep, or recursive."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class Loader(_BASE):  # type: ignore[valid-type,misc]
    """Safe loader with YAML 1.2 float resolution that rejects duplicate mapping keys."""

    def construct_document(self, node: yaml.Node) -> Any:
        """Check the tree's shape and its keys, then construct as usual."""
        _check_shape(node)
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


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_shape(root: yaml.Node) -> None:
    """Raise :class:`DocumentShapeError` unless the expanded tree is finite and within the limits.

    Each distinct node is visited once (aliases share nodes), iteratively: the expanded size and
    height of a node are 1 + the sums and maxima of its children's, memoised by node identity.
    """
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(c)] for c in kids)
            height[key] = 1 + max((height[id(c)] for c in kids), default=0)
            open_nodes.discard(key)
            if size[key] > MAX_NODES:
                raise DocumentShapeError(f"expands to more than {MAX_NODES} nodes (aliases "
                                         "included); a scenario or topology file has a few hundred")
            if height[key] > MAX_DEPTH:
                raise DocumentShapeError(f"nests deeper than {MAX_DEPTH} levels")
        elif key not in size:
            if key in open_nodes:
                raise DocumentShapeError("an alias refers to a node that contains it (recursive "
                                         "structure)")
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node) if id(c) not in size)


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
    """Parse YAML text with :class:`Loader`.

    Raises
    ------
    yaml.YAMLError
        Invalid YAML; :class:`DuplicateKeyError`; :class:`DocumentShapeError` (also for nesting so
        deep that the parser itself runs out of stack).
    """
    try:
        if _nesting_bound(text if isinstance(text, str) else text.decode("utf-8", "replace")) > SCAN_ABOVE:
            _scan_depth(text)
        return yaml.load(text, Loader=Loader)
    except RecursionError:
        raise DocumentShapeError(f"nests deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as err:
        # libyaml >= 0.2.5 (PyYAML 6.0.4 wheels) stops at its own depth limit, in its own words
        if not isinstance(err, DocumentShapeError) and "nesting depth" in str(err):
            raise DocumentShapeError(f"nests deeper than {MAX_DEPTH} levels") from None
        raise


#: Above this bound on the nesting, the text's events are scanned before composing: libyaml's
#: composer recurses in C, and a document nested 100 000 deep overflows the C stack (a crash no
#: Python code can catch). Below it, the Python stack gives out first, as a RecursionError.
SCAN_ABOVE = 500


def _nesting_bound(text: str) -> int:
    """An upper bound on the document's depth: every level opens on a new line or with one of
    ``[ { - ? :`` (block sequences and explicit keys can nest several levels on one line)."""
    return 1 + sum(text.count(c) for c in "\n[{-?:")


def _scan_depth(text: str | bytes) -> None:
    """Raise :class:`DocumentShapeError` at the first event deeper than :data:`MAX_DEPTH`."""
    starts = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    depth = 0
    for event in yaml.parse(text, Loader=Loader):
        if isinstance(event, starts):
            depth += 1
            if depth > MAX_DEPTH:
                raise DocumentShapeError(f"nests deeper than {MAX_DEPTH} levels")
        elif isinstance(event, ends):
            depth -= 1
