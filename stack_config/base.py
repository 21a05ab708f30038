"""The pydantic base every config section shares: camelCase keys, unknown keys refused, and the
protections every key gets without asking for them.

Every field of every section, including keys added later:

* numbers are finite (`allow_inf_nan=False`: pydantic accepts NaN and infinity by default, and a
  NaN compares false with every bound, so `queueThreshold: .nan` would pass `gt=0`), and `true` or
  `false` is not a number (pydantic's lax mode reads `true` as 1);
* strings are at most `MAX_STRING_CHARS` long unless the field says otherwise, carry no control
  characters (a trailing newline in a name reaches `metadata.name` and the engine's flags) unless
  the field is listed in `multiline_fields`, and never look like a secret: a token pasted into an
  ordinary field would be written into manifests in plain text, so it is refused without being
  quoted (secrets belong in `pulumi config set --secret`).

Bounds and formats per field come from stack_config/fields.py; tests/stack_config/test_config_limits.py fails
for a new number without an upper bound or a new string without a format.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from common.untrusted import has_control_characters, secret_kind

# Longest string a field takes unless it sets its own max_length: the longest formats the stack
# file holds are a DNS subdomain (253) and an image reference with a digest (~300).
MAX_STRING_CHARS = 512


def _allows_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_allows_bool(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _allows_bool(typing.get_args(annotation)[0])
    return False


def _takes_numbers(annotation: Any) -> bool:
    if annotation in (int, float):
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_takes_numbers(a) for a in typing.get_args(annotation))
    return False


def _holds_sections(annotation: Any) -> bool:
    """True when the field is (or lists) a nested section, which checks its own strings."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_sections(a) for a in typing.get_args(annotation))


# A URL with userinfo (`scheme://user:password@host`, or a token as the user): whatever field holds
# it, the credentials would be written into manifests and plan.md in plain text (RFC 3986 3.2.1
# deprecates "user:password" in URIs for exactly that reason).
URL_WITH_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s@]*@")


def _string_problem(value: str, multiline: bool) -> str | None:
    if URL_WITH_USERINFO.search(value):
        return (
            "the URL carries credentials (user:password@ or a token before the host), which would be written "
            "into the cluster's manifests and the plan in plain text; remove them and let the server "
            "authenticate another way"
        )
    kind = secret_kind(value)
    if kind:
        return (
            f"the value looks like {kind}; secrets never go in ordinary fields (they would be written into "
            "manifests in plain text): remove it, rotate it if the file was shared, and set secrets with "
            "`pulumi config set --secret`"
        )
    if not multiline and has_control_characters(value):
        return "the value contains a line break or another control character; remove it (check for a stray \\n)"
    return None


def _strings_in(value: Any, depth: int = 0):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict) and depth < 3:
        for k, v in value.items():
            yield from _strings_in(k, depth + 1)
            yield from _strings_in(v, depth + 1)
    elif isinstance(value, list) and depth < 3:
        for v in value:
            yield from _strings_in(v, depth + 1)


class StrictModel(BaseModel):
    # Unknown keys are errors: a typo like `maxModelLenght` must not silently fall back to a default.
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=False,
        frozen=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,
        str_max_length=MAX_STRING_CHARS,
    )

    # Fields whose text may span lines (a Jinja template); no other field may hold a line break.
    multiline_fields: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _every_value(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if (
            field is not None
            and isinstance(value, bool)
            and _takes_numbers(field.annotation)
            and not _allows_bool(field.annotation)
        ):
            raise ValueError(f"{str(value).lower()} is not a number; write a number")
        if field is not None and not isinstance(value, str) and _holds_sections(field.annotation):
            return value
        multiline = info.field_name in cls.multiline_fields
        for text in _strings_in(value):
            problem = _string_problem(text, multiline)
            if problem:
                raise ValueError(problem)
        return value
