"""The one way this package reads a YAML file: strictly, and in bounded memory.

``yaml.safe_load`` lets the last of two duplicate keys win silently, and builds whatever an
alias expands to: a few hundred bytes of nested anchors ("billion laughs") become billions
of values once pydantic walks them. Here a duplicate key is an error, aliases may expand to
at most :data:`~evaluator.common.limits.MAX_YAML_NODES` nodes, nesting and file size are bounded,
and every error is one line naming the file, line and column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from evaluator.common.errors import UserError
from evaluator.common.limits import MAX_CONFIG_BYTES, MAX_YAML_CHARS, MAX_YAML_DEPTH, MAX_YAML_NODES
from evaluator.common.readable import NotARegularFile, check_regular_file

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlRefused(UserError, ValueError):
    """A YAML file is unreadable, invalid or over a bound; the message is one line naming
    the file (and the line and column when there is one)."""


def _where(path: Path, mark: Any) -> str:
    if mark is None:
        return str(path)
    return f"{path}:{mark.line + 1}:{mark.column + 1}"


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that bounds depth, node count and alias expansion, and refuses
    duplicate keys."""

    def __init__(self, stream: str, path: Path) -> None:
        super().__init__(stream)
        self.path = path
        self._depth = 0
        self._nodes = 0

    def refuse(self, mark: Any, message: str) -> YamlRefused:
        return YamlRefused(f"{_where(self.path, mark)}: {message}")

    def compose_node(self, parent: Node | None, index: Any) -> Node:  # type: ignore[override]
        mark = self.peek_event().start_mark
        self._depth += 1
        self._nodes += 1
        if self._depth > MAX_YAML_DEPTH:
            raise self.refuse(mark, f"nested more than {MAX_YAML_DEPTH} levels deep")
        if self._nodes > MAX_YAML_NODES:
            raise self.refuse(mark, f"more than {MAX_YAML_NODES} values")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Node:  # type: ignore[override]
        node = super().compose_document()
        self._check_expansion(node)
        return node

    def _check_expansion(self, root: Node) -> None:
        """Count the nodes and characters the document has once aliases are expanded,
        without expanding them (each node's total is computed once)."""
        totals: dict[int, tuple[int, int]] = {}
        open_nodes: set[int] = set()

        def size(node: Node) -> tuple[int, int]:
            key = id(node)
            if key in totals:
                return totals[key]
            if key in open_nodes:
                raise self.refuse(node.start_mark, "an alias refers to a node that contains it")
            open_nodes.add(key)
            nodes, chars = 1, 0
            if isinstance(node, ScalarNode):
                chars = len(node.value)
            else:
                children: list[Node] = []
                if isinstance(node, SequenceNode):
                    children = node.value
                elif isinstance(node, MappingNode):
                    children = [n for pair in node.value for n in pair]
                for child in children:
                    child_nodes, child_chars = size(child)
                    nodes, chars = nodes + child_nodes, chars + child_chars
                    if nodes > MAX_YAML_NODES or chars > MAX_YAML_CHARS:
                        raise self.refuse(child.start_mark, "aliases (*name) expand this "
                                          f"document beyond {MAX_YAML_NODES} values or "
                                          f"{MAX_YAML_CHARS} characters")
            open_nodes.discard(key)
            totals[key] = (nodes, chars)
            return totals[key]

        size(root)

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:  # type: ignore[override]
        if isinstance(node, MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue  # '<<: *base' keys are overridden on purpose
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = seen.get(key)
                except TypeError:
                    continue  # unhashable: the base class reports it
                if earlier is not None:
                    raise self.refuse(key_node.start_mark, f"duplicate key {key!r} (first at "
                                      f"line {earlier.line + 1}); a later one would silently "
                                      "replace it")
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _one_line(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError):
        problem = error.problem or error.context or "invalid YAML"
        if error.context and error.problem:
            problem = f"{problem} ({error.context})"
        return f"{problem}"
    return " ".join(str(error).split())


def read_config_bytes(path: Path, what: str) -> bytes:
    """The bytes of a configuration file, refusing one larger than
    :data:`~evaluator.common.limits.MAX_CONFIG_BYTES` without reading it all, and one that is
    a FIFO or a device (reading it would hang or never end) without opening it."""
    try:
        check_regular_file(path, what)
    except NotARegularFile as exc:
        raise YamlRefused(str(exc)) from None
    except OSError:
        pass  # missing or unreadable: opening it says so below
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise YamlRefused(f"{path}: cannot read {what} ({exc.strerror})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise YamlRefused(f"{path}: {what} is larger than {MAX_CONFIG_BYTES} bytes")
    return data


def parse_yaml(data: bytes, path: Path) -> Any:
    """Parse one YAML document strictly (see the module docstring); raise
    :class:`YamlRefused` with a one-line message naming ``path``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlRefused(f"{path}: not UTF-8 (byte {exc.start})") from None
    loader = _StrictLoader(text, Path(path))
    try:
        return loader.get_single_data()
    except YamlRefused:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlRefused(f"{_where(path, mark)}: not valid YAML: {_one_line(exc)}") from None
    except yaml.YAMLError as exc:
        raise YamlRefused(f"{path}: not valid YAML: {_one_line(exc)}") from None
    except (ValueError, OverflowError, RecursionError) as exc:
        # e.g. an integer of more digits than Python converts (ValueError).
        raise YamlRefused(f"{path}: not valid YAML: {type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:200]}") from None
    finally:
        loader.dispose()


def load_yaml_file(path: Path, what: str) -> tuple[Any, bytes]:
    """Read and parse a configuration file: ``(data, raw bytes)``."""
    data = read_config_bytes(Path(path), what)
    return parse_yaml(data, Path(path)), data
