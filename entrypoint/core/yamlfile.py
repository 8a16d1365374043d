"""A small YAML document someone wrote (a job file, a fetch-assets manifest), parsed strictly and within bounds.

YAML's safe subset, bounded: nesting depth, values in all (an alias counts every time it is used, so an alias bomb
stops early), integer length (Python refuses to convert more than 4300 digits). A key given twice is an error (YAML
would silently keep the last one). Only plain values: strings, numbers, true/false, null, lists and mappings; dates
stay strings; any other tag (`!!binary`, `!!set`, `!!python/...`) is refused. Every problem comes out as
`YamlProblem` with its position, never as a library exception. (Read the file with `core.files.read_text`.)
"""

from __future__ import annotations

import yaml
from yaml.events import Event
from yaml.nodes import MappingNode, Node, ScalarNode

from entrypoint.core.messages import Catalogue, Text

MESSAGES = Catalogue(
    "core",
    {
        "yaml-too-deep": ("values nested more than {limit} levels deep", "值的嵌套超过 {limit} 层"),
        "yaml-too-many": (
            "more than {limit} values in all (an alias counts each time it is used)",
            "值的总数超过 {limit} 个(别名每被引用一次都计入)",
        ),
        "yaml-recursive-alias": (
            "the alias *{anchor} refers to the value it is part of",
            "别名 *{anchor} 引用了包含它自身的值",
        ),
        "yaml-long-integer": (
            "an integer of {length} characters (at most {limit})",
            "整数长 {length} 个字符(最多 {limit} 个)",
        ),
        "yaml-duplicate-key": (
            "the key '{key}' is given twice (lines {first} and {second}); YAML would silently keep only the last",
            "键 '{key}' 出现了两次(第 {first} 行与第 {second} 行);YAML 会静默地只保留最后一个",
        ),
        "yaml-unsupported-tag": (
            "the tag {tag} is not supported: use plain strings, numbers, true/false, lists and mappings",
            "不支持标签 {tag}:请只使用普通字符串、数字、true/false、列表与映射",
        ),
    },
)

MAX_DEPTH = 32
MAX_VALUES = 10_000
MAX_INT_CHARS = 64  # far beyond any setting, far below the 4300 digits Python converts at most
_CORE = "tag:yaml.org,2002:"
_TIMESTAMP = _CORE + "timestamp"
_MERGE = _CORE + "merge"


class YamlProblem(Exception):
    """The text is not acceptable YAML: `problem` (a library's English sentence, or ours in both languages) at
    `line`/`column` (1-based) when known."""

    def __init__(self, problem: Text | str, line: int | None, column: int | None) -> None:
        super().__init__(problem.en if isinstance(problem, Text) else problem)
        self.problem, self.line, self.column = problem, line, column


class _Bound(yaml.MarkedYAMLError):
    """A bound or rule of ours, with its sentence in both languages."""

    def __init__(self, text: Text, at: Node | Event) -> None:
        mark = at.start_mark
        super().__init__(problem=text.en, problem_mark=mark if isinstance(mark, yaml.Mark) else None)
        self.text = text


class _Loader(yaml.SafeLoader):
    """SafeLoader within bounds (depth, values, integer length), without dates, duplicate keys or other tags."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._values = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values it stands for, aliases expanded

    def _grow(self, count: int, at: Event) -> None:
        self._values += count
        if self._values > MAX_VALUES:
            raise _Bound(MESSAGES("yaml-too-many", limit=MAX_VALUES), at)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self.check_event()
        event: Event = self.current_event
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:  # the anchored value is still being read: it contains itself
                raise _Bound(MESSAGES("yaml-recursive-alias", anchor=event.anchor), event)
            self._grow(size, event)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Bound(MESSAGES("yaml-too-deep", limit=MAX_DEPTH), event)
        before = self._values
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._grow(1, event)
        self._sizes[id(node)] = self._values - before
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[object, object]:
        first_line: dict[tuple[str, str], int] = {}
        for key, _ in node.value:  # before merges (`<<: *base`) are flattened in: overriding those is their point
            if isinstance(key, ScalarNode) and key.tag != _MERGE:
                line = key.start_mark.line + 1
                if (key.tag, key.value) in first_line:
                    first = first_line[(key.tag, key.value)]
                    raise _Bound(MESSAGES("yaml-duplicate-key", key=key.value, first=first, second=line), key)
                first_line[(key.tag, key.value)] = line
        return dict(super().construct_mapping(node, deep))

    def _integer(self, node: ScalarNode) -> int:
        if len(node.value) > MAX_INT_CHARS:
            raise _Bound(MESSAGES("yaml-long-integer", length=len(node.value), limit=MAX_INT_CHARS), node)
        return self.construct_yaml_int(node)

    def _unsupported(self, node: Node) -> object:
        tag = "!!" + node.tag.removeprefix(_CORE) if node.tag.startswith(_CORE) else node.tag
        raise _Bound(MESSAGES("yaml-unsupported-tag", tag=tag), node)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _TIMESTAMP]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_constructor(_CORE + "int", _Loader._integer)
for _tag in ("binary", "timestamp", "omap", "pairs", "set"):
    _Loader.add_constructor(_CORE + _tag, _Loader._unsupported)
_Loader.add_constructor(None, _Loader._unsupported)


def parse(text: str) -> object:
    """The YAML document in `text` as plain Python values; raises `YamlProblem`."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text)
        return loader.get_single_data()
    except yaml.YAMLError as error:
        mark = error.problem_mark if isinstance(error, yaml.MarkedYAMLError) else None
        if isinstance(error, _Bound):
            problem: Text | str = error.text
        elif isinstance(error, yaml.MarkedYAMLError) and error.problem:
            problem = error.problem
        else:
            problem = str(error)
        raise YamlProblem(problem, mark.line + 1 if mark else None, mark.column + 1 if mark else None) from None
    finally:
        if loader is not None:
            loader.dispose()
