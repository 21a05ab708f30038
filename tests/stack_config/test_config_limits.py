"""Every key of the stack file carries limits, including keys added later (issue 15, "validate at the
edge, once").

Walks the whole schema (StackConfig and every section it reaches) and fails for a number without
both a lower and an upper bound, a string without a format (a field type of stack_config/fields.py,
a pattern, a Literal, or a validator of its own) and a list or mapping without a maximum length.
The shared protections of stack_config/base.py (finite numbers, no `true` as a number, no control
characters or pasted secrets in strings, a length cap) are checked to be on for every section.
A planted field without bounds proves the walk fires.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

import annotated_types
import pytest
from pydantic import AfterValidator, BaseModel, Field

from stack_config import StackConfig
from stack_config.base import StrictModel
from stack_config.deployer_stack import DeployerStackConfig

# Free text with no format the receiving side defines, each with its own length cap.
FREE_TEXT = {("ModelConfig", "chatTemplate")}


def sections(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            todo += [t for t in _leaf_types(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
    return seen


def _leaf_types(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, dict, typing.Annotated):
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            args = args[:1]
        return [leaf for arg in args for leaf in _leaf_types(arg)]
    return [annotation]


def _metadata(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return list(annotation.__metadata__) + _metadata(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        return [m for arg in typing.get_args(annotation) for m in _metadata(arg)]
    return []


def problems(model: type[BaseModel]) -> list[str]:
    found = []
    validators = {name for d in model.__pydantic_decorators__.field_validators.values() for name in d.info.fields}
    for name, field in model.model_fields.items():
        where = f"{model.__name__}.{name}"
        meta = list(field.metadata) + _metadata(field.annotation)
        leaves = _leaf_types(field.annotation)

        def bound(*kinds, meta=meta):
            return any(isinstance(m, kinds) for m in meta)

        if any(t in (int, float) for t in leaves) and not (
            (bound(annotated_types.Ge, annotated_types.Gt) and bound(annotated_types.Le, annotated_types.Lt))
            or name in validators
        ):
            found.append(f"{where}: a number without both bounds (Field(ge=..., le=...))")
        if str in leaves and not (
            bound(AfterValidator) or name in validators or any(getattr(m, "pattern", None) for m in meta)
        ):
            if (model.__name__, name) not in FREE_TEXT:
                found.append(f"{where}: a string without a format (a type from stack_config/fields.py)")
            elif not bound(annotated_types.MaxLen):
                found.append(f"{where}: free text without max_length")
        origin = typing.get_origin(field.annotation)
        containers = [
            a for a in [field.annotation, *typing.get_args(field.annotation)] if typing.get_origin(a) in (list, dict)
        ]
        if (origin in (list, dict) or containers) and not bound(annotated_types.MaxLen):
            found.append(f"{where}: a list or mapping without max_length")
        if any(t is Any for t in leaves):
            found.append(f"{where}: typed Any")
    return found


def test_every_section_is_a_strict_model_with_the_shared_protections():
    for model in sections(StackConfig):
        assert issubclass(model, StrictModel), model
        assert model.model_config["allow_inf_nan"] is False
        assert model.model_config["str_max_length"]


def test_every_key_has_bounds_or_a_format():
    assert [p for m in sections(StackConfig) for p in problems(m)] == []


def test_every_key_of_a_deployer_stack_has_bounds_or_a_format():
    assert [p for m in sections(DeployerStackConfig) for p in problems(m)] == []
    for model in sections(DeployerStackConfig):
        assert issubclass(model, StrictModel), model


def test_a_key_without_bounds_or_format_is_found():
    class Planted(StrictModel):
        replicas: int = 1
        name: str = "x"
        zones: list[str] = Field(default_factory=list)
        ok_count: int = Field(1, ge=1, le=5)
        ok_name: Annotated[str, AfterValidator(str.strip)] = "x"
        ok_kind: Literal["a", "b"] = "a"

    found = problems(Planted)
    assert any("Planted.replicas: a number" in p for p in found)
    assert any("Planted.name: a string" in p for p in found)
    assert any("Planted.zones: a list" in p for p in found)
    assert not any("ok_" in p for p in found)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True])
def test_the_base_refuses_nan_infinity_and_true_as_numbers_in_any_section(value):
    from pydantic import ValidationError

    class Section(StrictModel):
        threshold: float = Field(1.0, gt=0, le=10)

    with pytest.raises(ValidationError):
        Section.model_validate({"threshold": value})
