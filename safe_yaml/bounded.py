"""Load YAML from an untrusted file within limits, with one-line errors that name the file and line.

Why each limit (common/untrusted.py holds the numbers):

* libyaml (`yaml.CSafeLoader`) parses; the pure-Python loader is ~50x slower (a 50 MB file takes
  minutes) and overflows the interpreter's stack on deep nesting. Both build only plain values
  (no `!!python/...` tags).
* Aliases are shared when PyYAML builds values, so a "billion laughs" document loads in
  milliseconds and explodes later, in whatever walks or copies it (validation, JSON encoding). The
  events the parser emits are therefore checked first: the nesting depth, and the number of values
  every alias (and merge key `<<: *x`) stands for, counted as if written out. An alias inside the
  value it names (a recursive alias) is refused there too.
* Keys given twice: the Pulumi CLI refuses a stack file with a repeated key, so the stack-file
  reader asks for `unique_keys` and refuses it as well rather than silently keeping the last one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    ScalarEvent,
)

from common.untrusted import MAX_NESTING_DEPTH, InputLimitError, excerpt

LIBYAML = bool(getattr(yaml, "__with_libyaml__", False))
_BaseLoader = yaml.CSafeLoader if LIBYAML else yaml.SafeLoader
if TYPE_CHECKING:
    # The checker cannot subclass a base chosen at run time; it checks against the pure-Python
    # loader, whose constructor methods (SafeConstructor's) the C loader shares.
    _UniqueKeyBase = yaml.SafeLoader
else:
    _UniqueKeyBase = _BaseLoader

# Values aliases may stand for in one file, counted written out. Hand-written YAML that reuses a
# block with an anchor stays in the hundreds; a billion-laughs document needs millions.
MAX_ALIAS_VALUES = 100_000

# Kubernetes stores integers as int64 (and most fields as int32); JSON, which every consumer of these
# files speaks, carries no NaN or infinity.
INT64_MAX = 2**63 - 1


class YamlInputError(InputLimitError):
    """YAML that cannot be read within the limits; the message is one line naming file and line."""


class _UniqueKeyLoader(_UniqueKeyBase):
    """A key given twice in one mapping is an error, not a silent override."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {excerpt(key)} is defined twice (first on line {first + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _where(what: str, mark) -> str:
    return f"{what}:{mark.line + 1}:{mark.column + 1}" if mark is not None else what


# YAML indents with spaces only: "To maintain portability, tab characters must not be used in
# indentation" (YAML 1.2.2, 6.1 Indentation Spaces, https://yaml.org/spec/1.2.2/#61-indentation-spaces).
# libyaml reports a tab there as "found character that cannot start any token" or "a tab character
# that violates indentation"; either way the person needs to hear "tab", and where it is.
def _tab_at(text: str, mark) -> int | None:
    """The 0-based column of the tab the parser stopped at, on the mark's line, or None."""
    if mark is None or not text:
        return None
    lines = text.splitlines()
    if not 0 <= mark.line < len(lines):
        return None
    line = lines[mark.line]
    if 0 <= mark.column < len(line) and line[mark.column] == "\t":
        return mark.column
    indent = line[: len(line) - len(line.lstrip(" \t"))]  # a tab inside a value is no indentation
    return indent.index("\t") if "\t" in indent else None


def _yaml_error(what: str, err: yaml.YAMLError, text: str = "") -> YamlInputError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    tab = _tab_at(text, mark)
    if tab is not None and mark is not None:
        return YamlInputError(
            f"{what}:{mark.line + 1}:{tab + 1}: not valid YAML: a tab character at line {mark.line + 1}, column "
            f"{tab + 1}; YAML indents with spaces only, so replace the tab with spaces"
        )
    problem = getattr(err, "problem", None) or str(err)
    context = getattr(err, "context", None)
    text = " ".join(f"{context + ': ' if context else ''}{problem}".split())
    return YamlInputError(f"{_where(what, mark)}: not valid YAML: {text[:200]}")


def check_events(
    text: str, what: str, *, max_depth: int = MAX_NESTING_DEPTH, max_alias_values: int = MAX_ALIAS_VALUES
) -> None:
    """Walk the parser's events once: nesting depth, alias expansion and recursive aliases."""
    sizes: dict[str, int] = {}  # anchor -> values its node stands for, written out
    open_anchors: set[str] = set()  # anchors of collections not closed yet
    stack: list[tuple[str | None, int]] = []  # (anchor, values counted before it) per open collection
    counted = 0
    through_aliases = 0
    try:
        for event in yaml.parse(text, Loader=_BaseLoader):
            if isinstance(event, ScalarEvent):
                counted += 1
                if event.anchor:
                    sizes[event.anchor] = 1
            elif isinstance(event, AliasEvent):
                assert event.anchor is not None  # an alias always names its anchor
                if event.anchor in open_anchors:
                    raise YamlInputError(
                        f"{_where(what, event.start_mark)}: the alias *{event.anchor} sits inside the "
                        f"value it names (a recursive alias); write the value out"
                    )
                size = sizes.get(event.anchor, 1)
                counted += size
                through_aliases += size
                if through_aliases > max_alias_values:
                    raise YamlInputError(
                        f"{_where(what, event.start_mark)}: aliases (*{event.anchor} and others) expand to more than "
                        f"{max_alias_values:,} values; write the values out or use fewer aliases"
                    )
            elif isinstance(event, CollectionStartEvent):
                counted += 1
                stack.append((event.anchor, counted))
                if event.anchor:
                    open_anchors.add(event.anchor)
                if len(stack) > max_depth:
                    raise YamlInputError(f"{_where(what, event.start_mark)}: nested deeper than {max_depth} levels")
            elif isinstance(event, CollectionEndEvent):
                anchor, start = stack.pop()
                if anchor:
                    sizes[anchor] = counted - start + 1
                    open_anchors.discard(anchor)
            elif isinstance(event, DocumentStartEvent):
                sizes.clear()  # anchors do not cross documents
    except yaml.YAMLError as err:
        raise _yaml_error(what, err, text) from None
    except RecursionError:  # only the pure-Python parser recurses
        raise YamlInputError(f"{what}: nested too deeply to parse") from None


def load_all(
    text: str,
    what: str,
    *,
    unique_keys: bool = False,
    max_depth: int = MAX_NESTING_DEPTH,
    max_alias_values: int = MAX_ALIAS_VALUES,
) -> list[Any]:
    """Every document of `text` (already size-capped and decoded), checked before it is built."""
    check_events(text, what, max_depth=max_depth, max_alias_values=max_alias_values)
    loader = _UniqueKeyLoader if unique_keys else _BaseLoader
    try:
        return list(yaml.load_all(text, Loader=loader))
    except yaml.YAMLError as err:
        raise _yaml_error(what, err, text) from None
    except (RecursionError, OverflowError, ValueError, TypeError, KeyError) as err:
        # ValueError: a 5,000-digit integer; TypeError: an unhashable key the loader let through;
        # KeyError: an explicit tag PyYAML's constructor has no value for (`!!bool y`).
        raise YamlInputError(
            f"{what}: not usable YAML ({type(err).__name__}: {' '.join(str(err).split())[:120]})"
        ) from None


def load_one(text: str, what: str, **limits: Any) -> Any:
    """The single document of `text` (None for an empty file)."""
    docs = load_all(text, what, **limits)
    if len(docs) > 1:
        raise YamlInputError(f"{what}: holds {len(docs)} YAML documents (separated by ---); expected one")
    return docs[0] if docs else None


# ---------------------------------------------------------------------------------------------
# What a loaded value must look like before it goes on as JSON


def json_value_problems(value: Any, path: str = "", *, plain_only: bool, limit: int = 5) -> list[tuple[str, str]]:
    """(key path, problem) for values JSON (and so the Pulumi CLI and the Kubernetes API) cannot carry.

    Always: NaN and infinity, integers beyond int64. With `plain_only` also keys that are not
    strings and values that are not str/int/float/bool/null/list/mapping (YAML's `!!binary`,
    timestamps, sets), which the Pulumi CLI would hand over differently or not at all.
    """
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack and len(problems) < limit:
        node, where = stack.pop()
        shown = where or "(top level)"
        if isinstance(node, dict):
            items = []
            for key, child in node.items():
                if not isinstance(key, str):
                    if plain_only:
                        problems.append((shown, f"key {excerpt(key)} is not a string; quote it"))
                        continue
                    key = str(key)
                items.append((child, f"{where}.{key}" if where else key))
            stack.extend(reversed(items))
        elif isinstance(node, list):
            stack.extend(reversed([(child, f"{where}[{i}]") for i, child in enumerate(node)]))
        elif isinstance(node, bool) or node is None or isinstance(node, str):
            continue
        elif isinstance(node, int):
            if abs(node) > INT64_MAX:
                problems.append((shown, f"{excerpt(node)} is beyond the 64-bit integer range any API accepts"))
        elif isinstance(node, float):
            if not math.isfinite(node):
                problems.append((shown, f"{node} is not a finite number"))
        elif plain_only:
            problems.append(
                (
                    shown,
                    (
                        f"a YAML {type(node).__name__} value ({excerpt(node)}) is not plain data; "
                        "write a string, number, boolean, list or mapping"
                    ),
                )
            )
    return problems
