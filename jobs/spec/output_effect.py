"""Which fields of a job spec change its output: declared here once, for every field of ``JobSpec``.

Three comparisons read it: the reuse scope (``jobs/reuse/reuse_key.py``: may an earlier job's
computed values be copied?), an incremental run's baseline check (``jobs/planning/incremental.py``:
may its rows be carried?) and the sink rows' ``vector_origin`` (``products/sinks/sink_rows.py``: is a
stored row still the job's?). Each counts the effects it cares about; a field that is not declared
here fails ``tests/jobs/spec/test_output_effect.py``, so a new field is declared with its effect
before it can reach (or silently fall out of) any of them.

A nested model's fields are declared one by one where they differ (``output.include_fields``);
a whole nested model (``input``, ``webhook``) is declared at once where all of it has one effect.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import Any

from pydantic_core import to_jsonable_python

from poolq.jobs.spec.job_spec import JobSpec


class OutputEffect(Enum):
    VALUES = "values"  # changes computed values: vectors, scores, labels
    ROWS = "rows"  # changes the output rows, not a computed value: input fields copied into each row
    ENGINE = "engine"  # chooses the engine: what that changes is the engine identity, compared beside the options
    NONE = "none"  # changes no output: where the input is, lineage, the reuse choice, where rows and events go


_VALUES, _ROWS, _ENGINE, _NONE = OutputEffect.VALUES, OutputEffect.ROWS, OutputEffect.ENGINE, OutputEffect.NONE

SPEC_FIELDS: Mapping[str, OutputEffect] = MappingProxyType({
    "model": _VALUES,
    "task": _VALUES,
    "score_mode": _VALUES,
    "prompt_name": _VALUES,
    "prompt": _VALUES,
    "input": _NONE,  # the content hash covers each text; where it was read from changes nothing
    "output.format": _VALUES,
    "output.dtype": _VALUES,
    "output.dimensions": _VALUES,
    "output.int8_range": _VALUES,
    "output.sparse_top_k": _VALUES,
    "output.sparse_min_weight": _VALUES,
    "output.activation": _VALUES,
    "output.label_threshold": _VALUES,
    "output.token_label_scores": _VALUES,
    "output.include_fields": _ROWS,
    "long_documents.mode": _VALUES,
    "long_documents.side": _VALUES,
    "long_documents.window_tokens": _VALUES,
    "long_documents.max_embed_len": _VALUES,
    "long_documents.window_specials": _VALUES,
    "long_documents.chunk_by": _VALUES,
    "long_documents.chunk_tokens": _VALUES,
    "long_documents.chunk_sentences": _VALUES,
    "long_documents.overlap_tokens": _VALUES,
    "long_documents.allow_any_pooling": _VALUES,
    "long_documents.split_long_chunks": _VALUES,
    "incremental_from": _NONE,
    "reuse": _NONE,
    "sink": _NONE,
    "webhook": _NONE,
    "compute_dtype": _ENGINE,
    "allow_mixed_engines": _ENGINE,
    "limits": _NONE,  # how much may be spent: rows stop coming, none changes
})


def fields_without(counted: frozenset[OutputEffect]) -> frozenset[str]:
    """The declared fields (dotted paths) whose effect is not in ``counted``."""
    return frozenset(path for path, effect in SPEC_FIELDS.items() if effect not in counted)


def counted_options(options: Mapping[str, Any], counted: frozenset[OutputEffect],
                    at_default: Iterable[str] = ()) -> dict[str, Any]:
    """``options`` (a spec dumped as JSON, or a manifest's ``options``) with only the fields whose
    effect is in ``counted``: each other declared field is left out, or, if named in ``at_default``
    (a top-level field that digests made before this declaration held), set to its default where
    present, so those digests still match. A field not declared (a newer poolq's) is kept: it may
    change the output."""
    kept = copy.deepcopy(dict(options))
    held = frozenset(at_default)
    for path in fields_without(counted):
        *parents, leaf = path.split(".")
        holder: Any = kept
        for parent in parents:
            holder = holder.get(parent) if isinstance(holder, dict) else None
        if not isinstance(holder, dict) or leaf not in holder:
            continue
        if path in held:
            holder[leaf] = _default(path)
        else:
            del holder[leaf]
    return kept


def _default(name: str) -> Any:
    """A top-level field's default value, as a JSON value (as the spec dumps it)."""
    return to_jsonable_python(JobSpec.model_fields[name].get_default(call_default_factory=True))
