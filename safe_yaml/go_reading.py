"""Where PyYAML and the Kubernetes tools would read the same YAML as different values.

kubectl and the API server turn YAML into JSON with sigs.k8s.io/yaml, which decodes with Go's
gopkg.in/yaml.v2 (YAML 1.1 as that library implements it); the checker parses with PyYAML
(libyaml), also YAML 1.1 but resolved differently in places. A manifest that means one thing to the
checker and another to the cluster would let a violation through (`privileged: y` is the string "y"
to PyYAML and `true` to kubectl), so the checker refuses every such value, with its line, instead
of guessing which reading is meant.

The Go side follows gopkg.in/yaml.v2 v2.4.0 `resolve.go` (`resolveMapList`, `resolve`,
`yamlStyleFloat`, `parseTimestamp`) and `decode.go` (a timestamp decoded into an untyped value stays a
string; a merge key `<<` is applied where it stands, so it overrides explicit keys written before
it, while PyYAML lets every explicit key win):

* plain `y`, `Y`, `n`, `N` are booleans to Go, strings to PyYAML;
* `0o17` is an integer to Go (strconv.ParseInt, base 0), a string to PyYAML; `1_000` and `0x_1f`
  are integers to both;
* `1e3`, `1e+3` and `1.5e3` are floats to Go and strings to PyYAML (whose YAML 1.1 float needs a
  dot and a signed exponent); `08` is a float to Go, a string to PyYAML; base-60 numbers (`1:20`)
  are integers to PyYAML and strings to Go;
* an unquoted date (`2024-01-01`) is a timestamp to PyYAML and a string to Go;
* an explicit tag that one reader cannot apply (`!!bool y`: PyYAML has no such boolean, Go does).
"""

from __future__ import annotations

import datetime
import hashlib
import math
import pickle
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import ScalarNode

from safe_yaml.bounded import _BaseLoader, _where

TAG = "tag:yaml.org,2002:"
GO_SOURCE = "gopkg.in/yaml.v2 v2.4.0 via sigs.k8s.io/yaml"

# resolve.go resolveMapList: plain scalars looked up before anything else.
_GO_WORDS: dict[str, Any] = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], True),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], False),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], None),
    **dict.fromkeys([".nan", ".NaN", ".NAN"], math.nan),
    **dict.fromkeys([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], math.inf),
    **dict.fromkeys(["-.inf", "-.Inf", "-.INF"], -math.inf),
}
# resolve.go yamlStyleFloat: the floats tried after integers (`1.`, `1e3` and `.5` are floats).
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# What Go's strconv.ParseFloat takes from a value that starts with '.' (resolve.go, hint '.').
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_GO_DATE = re.compile(r"[0-9]{4}-")
INT64 = 2**63
UINT64 = 2**64


class _Unreadable(Exception):
    """Go's decoder fails on this scalar (an explicit tag it cannot apply)."""


def _go_integer(text: str) -> int | None:
    """strconv.ParseInt/ParseUint with base 0 (after yaml.v2 drops every '_'): 0x, 0o, 0b, a leading
    0 for octal, an optional sign; None when Go reads no integer."""
    plain = text.replace("_", "")
    sign, digits = (-1, plain[1:]) if plain[:1] == "-" else (1, plain[1:] if plain[:1] == "+" else plain)
    bases = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
    base = bases.get(digits[:2], 8 if len(digits) > 1 and digits[0] == "0" else 10)
    body = digits[2:] if digits[:2] in bases else digits
    if not body or not all(c in "0123456789abcdefABCDEF"[: base if base <= 10 else 22] for c in body):
        return None
    value = sign * int(body, base)
    return value if -INT64 <= value < UINT64 else None


def _go_date(text: str) -> bool:
    """parseTimestamp: four digits, '-', then one of Go's allowed layouts."""
    if not _GO_DATE.match(text):
        return False
    for layout in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"):
        try:
            datetime.datetime.strptime(re.sub(r"(\.\d+)?(Z|[+-]\d\d:\d\d)?$", "", text), layout)
            return True
        except ValueError:
            continue
    return False


def go_plain(text: str) -> Any:
    """The value yaml.v2 gives a plain scalar decoded into an untyped Go value (then JSON)."""
    if text in _GO_WORDS:
        return _GO_WORDS[text]
    first = text[:1]
    if first == ".":
        value = float(text) if _GO_DOT_FLOAT.fullmatch(text) else math.nan
        return value if math.isfinite(value) else text
    if first in "+-0123456789" and first:
        if _go_date(text):
            return text  # a timestamp decoded into interface{} stays a string (decode.go)
        integer = _go_integer(text)
        if integer is not None:
            return integer
        plain = text.replace("_", "")
        if _GO_FLOAT.fullmatch(plain):
            value = float(plain)
            # strconv.ParseFloat reports a value beyond float64 as an error: it stays a string.
            return value if math.isfinite(value) else text
    return text


def go_tagged(tag: str, text: str) -> Any:
    """A scalar with an explicit tag: yaml.v2 resolves it and fails unless the result has that tag
    (an integer given !!float becomes a float)."""
    if tag == TAG + "str":
        return text
    value = go_plain(text)
    kinds = {"bool": bool, "int": int, "float": float, "null": type(None)}
    wanted = kinds.get(tag.removeprefix(TAG))
    if wanted is None:
        return _PY_ONLY  # a tag Go resolves some other way (!!binary, !!timestamp, custom): not compared
    if wanted is float and type(value) is int:
        return float(value)
    if type(value) is not wanted:
        raise _Unreadable
    return value


_PY_ONLY = object()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    """Equal as the JSON the API server stores: an integer and a float of the same value are one number."""
    if _number(a) and _number(b):
        return bool(a == b) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and bool(a == b)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, (int, float)):
        shown = repr(value)
        return f"the number {shown if len(shown) <= 40 else shown[:37] + '...'}"
    return f"a {type(value).__name__}"


def _py_scalar(event: ScalarEvent) -> Any:
    """The value PyYAML's safe loader builds for this scalar (its resolver, then its constructor)."""
    tag = event.tag
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(ScalarNode, event.value, event.implicit)
    return _RESOLVER.construct_object(ScalarNode(tag, event.value, style=event.style or None), deep=True)


def _plain(event: ScalarEvent) -> bool:
    # libyaml reports a plain scalar's style as '', the pure-Python parser as None.
    return not event.style


# A pure-Python SafeLoader used only for its resolver and scalar constructor (no text is parsed).
_RESOLVER = yaml.SafeLoader("")


def _scalar_problem(event: ScalarEvent, what: str) -> str | None:
    implicit = event.tag is None or event.tag == "!"
    if implicit and not _plain(event):
        return None  # quoted or a block scalar: a string to both
    try:
        go: Any = go_plain(event.value) if implicit else go_tagged(str(event.tag), event.value)
    except _Unreadable:
        go = _Unreadable
    if go is _PY_ONLY:
        return None
    try:
        py: Any = _py_scalar(event)
    except (yaml.YAMLError, ValueError, KeyError, TypeError, OverflowError):
        py = _Unreadable
    if isinstance(py, int) and not isinstance(py, bool) and abs(py) > INT64:
        return None  # beyond int64: refused after loading, in the words of bounded.json_value_problems
    where = _where(what, event.start_mark)
    if go is _Unreadable or py is _Unreadable:
        if go is py:
            return None
        reader, other = ("Go's YAML", "PyYAML") if go is _Unreadable else ("PyYAML", "Go's YAML")
        return (
            f"{where}: {str(event.tag).replace(TAG, '!!')} {event.value[:40]!r} cannot be read by {reader} but is "
            f"by {other} ({GO_SOURCE}); write the value plainly (true, false, a number) or quote it as a string"
        )
    if _same(py, go):
        return None
    return (
        f"{where}: {event.value[:40]!r} is {_shown(py)} to this checker but {_shown(go)} to kubectl and the "
        f"API server ({GO_SOURCE}); quote it if you mean a string, or write it so both read the same "
        "(true/false, a plain number)"
    )


@dataclass
class _Mapping:
    """An open mapping: the keys written so far and the ones merge keys brought in."""

    anchor: str | None
    explicit: set[str] = field(default_factory=set)
    merged: set[str] = field(default_factory=set)
    keys_in_order: list[str] = field(default_factory=list)
    expecting_key: bool = True
    merge_at: Any = None  # the `<<` key's mark while its value is being read
    merge_value: list[str] = field(default_factory=list)


@dataclass
class _Sequence:
    anchor: str | None
    merge_source: bool  # the value of a `<<`: the keys of its mappings are merged


def _merge_problem(frame: _Mapping, merged: list[str], what: str) -> str | None:
    again = sorted((set(merged) & frame.explicit) | (set(merged) & frame.merged))
    frame.merged |= set(merged)
    if not again:
        return None
    return (
        f"{_where(what, frame.merge_at)}: the merge key `<<` sets {', '.join(again[:3])} again after "
        f"{'it is' if len(again) == 1 else 'they are'} set above; PyYAML keeps the value written first, "
        f"Go's YAML ({GO_SOURCE}) applies the merge where it stands: write each key once"
    )


def disagreements(text: str, what: str, limit: int = 20) -> list[str]:
    """One line per value the two readers read differently (at most `limit`). `text` has passed
    safe_yaml.bounded.check_events (depth, aliases), so walking its events is bounded."""
    problems: list[str] = []
    keys_of: dict[str, list[str]] = {}  # anchor of a mapping -> its keys (for `<<: *anchor`)
    stack: list[_Mapping | _Sequence] = []

    def value_done(keys: list[str] | None) -> None:
        """A complete value was read in the innermost open collection; `keys`: its keys if a mapping."""
        if not stack:
            return
        top = stack[-1]
        if isinstance(top, _Sequence):
            if top.merge_source and keys is not None and len(stack) > 1:
                parent = stack[-2]
                if isinstance(parent, _Mapping):
                    parent.merge_value += keys
            return
        if top.expecting_key:
            top.expecting_key = False
            return
        top.expecting_key = True
        if top.merge_at is not None:
            problem = _merge_problem(top, [*top.merge_value, *(keys or [])], what)
            if problem:
                problems.append(problem)
            top.merge_at, top.merge_value = None, []

    for event in yaml.parse(text, Loader=_BaseLoader):
        if len(problems) >= limit:
            break
        if isinstance(event, DocumentStartEvent):
            keys_of.clear()
            stack.clear()
        elif isinstance(event, ScalarEvent):
            top = stack[-1] if stack else None
            is_key = isinstance(top, _Mapping) and top.expecting_key
            if is_key and event.value == "<<" and _plain(event) and event.tag in (None, "!", TAG + "merge"):
                top.merge_at = event.start_mark  # type: ignore[union-attr]
            else:
                problem = _scalar_problem(event, what)
                if problem:
                    problems.append(problem)
                if is_key:
                    top.explicit.add(event.value)  # type: ignore[union-attr]
                    top.keys_in_order.append(event.value)  # type: ignore[union-attr]
            if event.anchor:
                keys_of.pop(event.anchor, None)
            value_done(None)
        elif isinstance(event, AliasEvent):
            value_done(keys_of.get(str(event.anchor)))
        elif isinstance(event, MappingStartEvent):
            stack.append(_Mapping(event.anchor))
        elif isinstance(event, SequenceStartEvent):
            parent = stack[-1] if stack else None
            merging = isinstance(parent, _Mapping) and not parent.expecting_key and parent.merge_at is not None
            stack.append(_Sequence(event.anchor, merging))
        elif isinstance(event, MappingEndEvent):
            frame = stack.pop()
            assert isinstance(frame, _Mapping)
            keys = sorted(frame.explicit | frame.merged)
            if frame.anchor:
                keys_of[frame.anchor] = keys
            value_done(keys)
        elif isinstance(event, SequenceEndEvent):
            frame = stack.pop()
            value_done(None)
    return problems[:limit]


class _GoSafeDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting every string Go's YAML would read as something else.

    PyYAML's emitter is pure Python and most of a plan's time is spent in it (a CRD chart writes
    megabytes). Two of its steps are pure functions of a scalar's text and are looked up instead of
    redone: the emitter's analysis of a scalar (`Emitter.analyze_scalar`, read only by the style
    choice and the writers, never changed) and the resolver's implicit tag (`BaseResolver.resolve`,
    which for a scalar depends on its text and `implicit` alone while no path resolver is added,
    as none is here). The written text is the same byte for byte
    (tests/policies/test_go_reading.py holds it against PyYAML's own dumper)."""

    def analyze_scalar(self, scalar: str) -> Any:
        key = (scalar, self.allow_unicode)
        analysis = _ANALYSES.get(key)
        if analysis is None:
            analysis = super().analyze_scalar(scalar)
            _remember(_ANALYSES, key, analysis)
        return analysis

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not ScalarNode or self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = _TAGS.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            _remember(_TAGS, key, tag)
        return tag


# Bounded, so a process that dumps for hours (a fuzz worker) does not grow without end.
_MEMO_ENTRIES = 200_000
_ANALYSES: dict[tuple[str, bool | None], Any] = {}
_TAGS: dict[tuple[str, Any], str] = {}


def _remember(memo: dict, key: Any, value: Any) -> None:
    if len(memo) >= _MEMO_ENTRIES:
        memo.clear()
    memo[key] = value


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # PyYAML quotes a string only when its own resolver would misread it; `y`, `1e3` or `0o17` it
    # writes plain, and kubectl reads them as a boolean or a number.
    if not isinstance(go_plain(value), str):
        return dumper.represent_scalar(TAG + "str", value, style="'")
    return dumper.represent_str(value)


_GoSafeDumper.add_representer(str, _represent_str)


# The text of data dumped before in this process, by a digest of the data's pickle: a process that
# plans more than once (a test worker, the fuzz worker) writes the same CRDs and charts every time.
# Equal pickles mean equal types, values, key order and sharing of objects (pickle's memo, as the
# dumper's anchors follow object identity), so the same text; a miss only costs the dump. Bounded
# by the characters kept, oldest first out.
class _Dumps:
    def __init__(self, max_chars: int) -> None:
        self.texts: OrderedDict[bytes, str] = OrderedDict()
        self.chars = 0
        self.max_chars = max_chars

    def get(self, key: bytes) -> str | None:
        text = self.texts.get(key)
        if text is not None:
            self.texts.move_to_end(key)
        return text

    def put(self, key: bytes, text: str) -> None:
        self.texts[key] = text
        self.chars += len(text)
        while self.chars > self.max_chars and len(self.texts) > 1:
            self.chars -= len(self.texts.popitem(last=False)[1])


_DUMPS = _Dumps(max_chars=48 * 1024 * 1024)


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_GoSafeDumper, sort_keys=False, default_flow_style=False)


def dump_for_go(data: Any) -> str:
    """YAML of `data` that PyYAML and Go's YAML read back as the same values (keys in given order)."""
    try:
        key = hashlib.sha256(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)).digest()
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return _dump(data)
    text = _DUMPS.get(key)
    if text is None:
        text = _dump(data)
        _DUMPS.put(key, text)
    return text
