"""Every field of the job spec, nested ones too, is declared as changing the output or not, once
(jobs/spec/output_effect.py); the reuse scope, an incremental run's comparison and the sink rows'
origin all read that declaration."""
import dataclasses
import types
import typing

import pytest
from pydantic import BaseModel, Field

from poolq.jobs.spec.job_spec import JobSpec, OutputOptions
from poolq.jobs.spec.output_effect import SPEC_FIELDS, OutputEffect, counted_options


def _nested_models(annotation) -> list[type]:
    """The models (pydantic models or dataclasses) an annotation holds: ``A | B | None`` -> [A, B]."""
    if isinstance(annotation, type) and (issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation)):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [model for arg in typing.get_args(annotation) for model in _nested_models(arg)]
    return []


def _fields(model: type) -> dict:
    return model.model_fields if issubclass(model, BaseModel) else model.__pydantic_fields__


def undeclared(model: type, prefix: str = "") -> list[str]:
    """The spec's fields (dotted) that neither are declared nor are models whose every field is."""
    missing = []
    for name, field in _fields(model).items():
        path = prefix + name
        if path in SPEC_FIELDS:
            continue
        nested = _nested_models(field.annotation)
        missing += [found for child in nested for found in undeclared(child, path + ".")] if nested else [path]
    return missing


def _is_field(path: str) -> bool:
    models: list[type] = [JobSpec]
    *parents, leaf = path.split(".")
    for parent in parents:
        models = [nested for model in models if parent in _fields(model)
                  for nested in _nested_models(_fields(model)[parent].annotation)]
    return any(leaf in _fields(model) for model in models)


def test_every_field_of_the_spec_is_declared():
    assert undeclared(JobSpec) == []


def test_a_field_added_later_fails_until_it_is_declared_nested_ones_too():
    class FutureOutput(OutputOptions):
        rounding: int = 0

    class FutureSpec(JobSpec):
        pooling_temperature: float = Field(1.0)
        output: FutureOutput = Field(default_factory=FutureOutput)

    assert undeclared(FutureSpec) == ["output.rounding", "pooling_temperature"]


def test_every_declaration_names_a_field_of_the_spec():
    """A renamed field must not leave a stale declaration behind (and itself undeclared)."""
    assert [path for path in SPEC_FIELDS if not _is_field(path)] == []


def test_prompts_change_the_output_and_a_webhook_does_not():
    assert SPEC_FIELDS["prompt_name"] is SPEC_FIELDS["prompt"] is OutputEffect.VALUES
    assert SPEC_FIELDS["webhook"] is OutputEffect.NONE
    assert SPEC_FIELDS["output.include_fields"] is OutputEffect.ROWS


@pytest.mark.parametrize(("counted", "kept"), [
    (frozenset({OutputEffect.VALUES}), {"model", "output"}),
    (frozenset({OutputEffect.VALUES, OutputEffect.ROWS}), {"model", "output", "include_fields"}),
    (frozenset({OutputEffect.VALUES, OutputEffect.ENGINE}), {"model", "output", "compute_dtype"}),
])
def test_counted_options_keep_what_they_count_and_fields_not_declared(counted, kept):
    options = {"model": "m", "output": {"dtype": "int8", "include_fields": ["t"]}, "webhook": {"url": "https://h/"},
               "compute_dtype": "float16", "reuse": "tenant", "a_newer_poolqs_option": 1}
    counted_view = counted_options(options, counted)
    found = set(counted_view) | {name for name in counted_view["output"] if name == "include_fields"}
    assert found == kept | {"a_newer_poolqs_option"}
    assert options["output"]["include_fields"] == ["t"]  # the caller's dict is left as it was


def test_a_field_held_at_its_default_is_set_to_it_where_present():
    options = {"model": "m", "webhook": {"url": "https://h/"}, "reuse": "tenant"}
    assert counted_options(options, frozenset({OutputEffect.VALUES}), ("webhook", "reuse")) == \
        {"model": "m", "webhook": None, "reuse": "job"}
    assert counted_options({"model": "m"}, frozenset({OutputEffect.VALUES}), ("webhook",)) == {"model": "m"}
