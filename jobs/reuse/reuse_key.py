"""Reuse keys: which computed outputs are the same output.

A key is ``sha256(scope, content hash)``:

- the *content hash* (``jobs/inputs/content_hash.py``) covers the exact text, a pair's query and
  caller-given chunk spans. The text is not normalized further (case, whitespace, Unicode forms):
  the tokenizer may see those differences, and a reused row must equal a fresh one bit for bit.
  In every long-document mode the whole document is the unit, so a late chunk's key covers the
  context it was pooled in.
- the *scope* covers what made the output: the engine's identity (model files' fingerprint and
  compute dtype, ``EnginePool.identity``) and the job spec's options. The options are the spec's
  own typed fields, dumped, minus the few named in ``REUSE_NEUTRAL`` (where the input is, lineage,
  the reuse choice itself, where rows are loaded, copied input fields): an option added to the spec later is covered
  without anyone listing it here.
"""
from __future__ import annotations

import hashlib
import json

from poolq.jobs.model.job_spec import JobSpec

# Spec fields that do not change any computed value (dotted: a field of a nested model).
REUSE_NEUTRAL: frozenset[str] = frozenset({"input", "incremental_from", "reuse", "sink", "output.include_fields"})


def reuse_options(spec: JobSpec) -> dict:
    """The spec's options that change its outputs, as JSON values."""
    options = spec.model_dump(mode="json")
    for name in REUSE_NEUTRAL:
        *parents, leaf = name.split(".")
        holder = options
        for parent in parents:
            holder = holder.get(parent) or {}
        holder.pop(leaf, None)
    return options


def reuse_scope(spec: JobSpec, engine_identity: str) -> str:
    """The hex digest every key of a job of ``spec`` run by ``engine_identity`` starts from."""
    body = json.dumps({"engine": engine_identity, "options": reuse_options(spec)}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def reuse_key(scope: str, content_hash: str) -> str:
    """The key of one document's output: its content under the job's scope (64 hex digits)."""
    return hashlib.sha256(f"{scope}:{content_hash}".encode("ascii")).hexdigest()
