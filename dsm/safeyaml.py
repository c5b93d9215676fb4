"""The one way dsm reads YAML (contracts, a registry's aliases and statuses, policies, price tables): safe
tags only, and bounded by limits checked before anything is built.

A YAML file can be small and still stand for an unbounded document: an alias (``*a``) repeats a node
without repeating its text, so ten lines of nested aliases stand for 10**9 values (the "billion laughs"),
and every later walk over the result (validating it, printing it as JSON) grows without end. An alias
inside its own anchor (``&a [*a]``) is a cycle. Refused, with the file named and nothing built:

- text longer than :data:`MAX_YAML_BYTES`, or not UTF-8;
- a document that holds more than :data:`MAX_YAML_VALUES` values once every alias is expanded (counted
  on the parsed node graph, in time linear in its size), or an alias inside its own anchor;
- nesting deeper than the parser's own limit (libyaml: 1,000 levels).

>>> load_yaml("a: &x [1, 2]\\nb: *x\\n", source="doc.yaml")
{'a': [1, 2], 'b': [1, 2]}
>>> load_yaml("a: &a [*a]", source="loop.yaml")
Traceback (most recent call last):
...
dsm.errors.ContractError: loop.yaml: the anchor at line 1 is used (as an alias) inside itself, a cycle; \
YAML that dsm reads holds no cycles
"""

from __future__ import annotations

from typing import Any

import yaml

from dsm.errors import ContractError

__all__ = ["MAX_YAML_BYTES", "MAX_YAML_VALUES", "YAML_READ_LIMIT", "SafeLoader", "load_yaml"]

MAX_YAML_BYTES = 256 * 1024 * 1024
"""The longest YAML text dsm reads (a contract of a million shards takes about 200 MB)."""

YAML_READ_LIMIT = MAX_YAML_BYTES + 1
"""What to read of a YAML file (``Location.read_bytes(rel, limit=YAML_READ_LIMIT)``): one byte more than
:func:`load_yaml` accepts, so a longer file is refused without reading all of it."""

MAX_YAML_VALUES = 20_000_000
"""The most values (scalars, lists, mappings) a document may hold with its aliases expanded: about what
the longest text holds written out, so an alias never makes a document bigger than its text could."""

SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""The loader every read uses (libyaml's when installed): safe tags only."""


def load_yaml(
    text: str | bytes,
    *,
    source: str,
    loader: type[yaml.SafeLoader] | None = None,
    max_bytes: int = MAX_YAML_BYTES,
    max_values: int = MAX_YAML_VALUES,
) -> Any:
    """The document ``text`` holds (None when it is empty), read with ``loader`` (a subclass of
    :data:`SafeLoader`); ContractError naming ``source`` (and the line) when it is not valid YAML or passes
    a limit of the module."""
    size = len(text.encode("utf-8") if isinstance(text, str) else text)
    if size > max_bytes:
        raise ContractError(
            f"{source}: more than {max_bytes:,} bytes of YAML, the most dsm reads (is this a contract, "
            "policy or registry file?)"
        )
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ContractError(
                f"{source}: not UTF-8 text (byte {exc.start}); YAML files dsm reads are UTF-8"
            ) from None
    reader = (loader or SafeLoader)(text)
    try:
        node = reader.get_single_node()
        if node is None:
            return None
        _check_expanded_size(node, source, max_values)
        return reader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise ContractError(f"{source}: YAML syntax error at {where}: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ContractError(f"{source}: not valid YAML: {exc}") from None
    finally:
        reader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expanded_size(root: yaml.Node, source: str, max_values: int) -> None:
    """ContractError when the document under ``root`` holds more than ``max_values`` values with every
    alias expanded, or holds a cycle. Iterative post-order walk; each node's expanded size is computed once
    (a shared node is an alias: its size counts at every use, without walking it again)."""
    size: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            if size[key] > max_values:
                line = node.start_mark.line + 1 if node.start_mark else "?"
                raise ContractError(
                    f"{source}: the node at line {line} stands for more than {max_values:,} values once its "
                    "aliases are expanded; dsm refuses YAML that grows that much (an alias bomb?)"
                )
            continue
        if key in size:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                line = child.start_mark.line + 1 if child.start_mark else "?"
                raise ContractError(
                    f"{source}: the anchor at line {line} is used (as an alias) inside itself, a cycle; "
                    "YAML that dsm reads holds no cycles"
                )
            if id(child) not in size:
                stack.append((child, False))
