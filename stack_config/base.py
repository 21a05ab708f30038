"""The pydantic base every config section shares: camelCase keys, unknown keys refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class StrictModel(BaseModel):
    # Unknown keys are errors: a typo like `maxModelLenght` must not silently fall back to a default.
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=False,
        frozen=True,
        use_attribute_docstrings=True,
    )
