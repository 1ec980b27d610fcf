"""Reuse keys: which computed outputs are the same output.

A key is ``sha256(scope, content hash)``:

- the *content hash* (``jobs/inputs/content_hash.py``) covers the exact text, a pair's query and
  caller-given chunk spans. The text is not normalized further (case, whitespace, Unicode forms):
  the tokenizer may see those differences, and a reused row must equal a fresh one bit for bit.
  In every long-document mode the whole document is the unit, so a late chunk's key covers the
  context it was pooled in.
- the *scope* covers what made the output: the engine's identity (model files' fingerprint and
  compute dtype, ``EnginePool.identity``) and the job spec's options. The options are the spec's
  own typed fields, dumped, minus those that change no computed value: ``jobs/spec/output_effect.py``
  declares every field's effect, once (the scope counts values and the engine choice; it leaves out
  where the input is, lineage, the reuse choice itself, where rows are loaded and events sent, and
  copied input fields). A field not declared there fails a test, so none is left out by oversight.
  A job naming no ``dimensions`` on a model saved with ``truncate_dim`` also counts that size
  (``default_dimensions``): poolq cuts such vectors to it, while poolq before that cut stored them whole
  under the same files and options. Every other scope is as before, so its stored outputs still match.
"""
from __future__ import annotations

import hashlib
import json

from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.output_effect import OutputEffect, counted_options, fields_without

# What the scope counts; the engine's own fields are redundant beside its identity, but scopes always held them.
SCOPE_COUNTS = frozenset({OutputEffect.VALUES, OutputEffect.ENGINE})
# Spec fields that do not change any computed value (dotted: a field of a nested model).
REUSE_NEUTRAL: frozenset[str] = fields_without(SCOPE_COUNTS)
# Scopes made before webhooks were declared neutral held ``"webhook": null``: kept so, they still match.
_HELD_AT_DEFAULT = ("webhook",)


def reuse_options(spec: JobSpec) -> dict:
    """The spec's options that change its outputs, as JSON values."""
    return counted_options(spec.model_dump(mode="json"), SCOPE_COUNTS, _HELD_AT_DEFAULT)


def reuse_scope(spec: JobSpec, engine_identity: str, truncate_dim: int | None = None, device: str = "cpu") -> str:
    """The hex digest every key of a job of ``spec`` run by ``engine_identity`` on ``device`` (its kind)
    starts from; ``truncate_dim``: the model's (sentence-transformers'), the size of its vectors where
    the job names no dimensions. Another device's kernels give other last bits: its outputs are kept
    apart (a CPU scope is written as before devices were told apart, so its stored outputs still count)."""
    scope: dict = {"engine": engine_identity, "options": reuse_options(spec)}
    if truncate_dim is not None and spec.output.dimensions is None:
        scope["default_dimensions"] = truncate_dim
    if device != "cpu":
        scope["device"] = device
    body = json.dumps(scope, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def reuse_key(scope: str, content_hash: str) -> str:
    """The key of one document's output: its content under the job's scope (64 hex digits)."""
    return hashlib.sha256(f"{scope}:{content_hash}".encode("ascii")).hexdigest()
