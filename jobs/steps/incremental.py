"""Incremental runs: carry documents unchanged since an earlier run instead of embedding them.

A job with ``incremental_from`` names an earlier job. If that job finished (succeeded or
partially succeeded) with the same model and options, and its vectors were all made by the engine
that would make them now (the model files' fingerprint and the compute dtype: see
``JobContext.engine_identity``; a name pointing at new files changes it), its output is the
*baseline*: a document
of the new input whose id and content hash match a baseline row is *carried*: its rows are
copied into ``parts/carried-NNNNN.parquet`` of the new job (one per baseline part), so the new
run's manifest lists every document, like a full run's.

Memory: planning holds the baseline's ``{id: content_hash}`` (so it grows with the number of
documents of the earlier job, about 200 bytes each with short ids) and the set of carried ids; rows are copied
one baseline part at a time.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from poolq.jobs.context import JobContext
from poolq.jobs.inputs.records import InputRecord
from poolq.jobs.job import JobSpec, JobState
from poolq.jobs.ledger.job_ledger import CarriedPart
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.steps.content_hash import content_hash
from poolq.storage import ObjectNotFoundError, read_embeddings, write_embeddings

log = logging.getLogger(__name__)

USABLE_STATES = frozenset({JobState.SUCCEEDED, JobState.PARTIALLY_SUCCEEDED})


class BaselineChanged(RuntimeError):
    """A baseline part vanished or changed while planning: carried rows would be missing."""


def comparable_options(options: dict) -> dict:
    """A manifest's (or spec's) options without what does not change the vectors."""
    return {name: value for name, value in options.items() if name not in ("input", "incremental_from")}


def baseline_manifest(spec: JobSpec, ctx: JobContext) -> JobManifest | None:
    """The manifest of ``spec.incremental_from`` if its rows can be carried into ``spec``'s job."""
    if spec.incremental_from is None:
        return None
    manifest = ctx.ledger(spec.incremental_from).manifest()
    if manifest is None or manifest.status not in USABLE_STATES:
        log.info("incremental_from %s: not finished successfully; embedding everything", spec.incremental_from)
        return None
    options = comparable_options(spec.model_dump(mode="json"))
    if manifest.model != spec.model or comparable_options(manifest.options) != options:
        log.info("incremental_from %s: other model or options; embedding everything", spec.incremental_from)
        return None
    engine = ctx.engine_identity(spec.model)
    if manifest.engines != [engine]:
        log.info("incremental_from %s: made by %s, not %s (other model files or dtype); embedding everything",
                 spec.incremental_from, manifest.engines, engine)
        return None
    return manifest


@dataclass
class Baseline:
    """The earlier run's ``{id: content_hash}`` and the parts its rows are in."""

    job_id: str
    part_keys: tuple[str, ...]
    hashes: dict[str, str]
    dimensions: int | None

    @classmethod
    def load(cls, spec: JobSpec, ctx: JobContext) -> "Baseline | None":
        """The baseline of ``spec``'s job, or None when it has none (or cannot use it)."""
        manifest = baseline_manifest(spec, ctx)
        if manifest is None:
            return None
        keys = tuple(part.key for part in manifest.parts)
        hashes: dict[str, str] = {}
        try:
            for key in keys:
                table = read_embeddings(ctx.store.get(key), columns=["id", "content_hash"])
                if "content_hash" not in table.column_names:
                    continue  # written before content hashes existed: its documents are embedded again
                hashes.update(zip(table.column("id").to_pylist(), table.column("content_hash").to_pylist()))
        except ObjectNotFoundError as exc:  # its output was deleted: nothing to carry
            log.warning("incremental_from %s: %s; embedding everything", spec.incremental_from, exc)
            return None
        return cls(spec.incremental_from, keys, hashes, manifest.dimensions)

    def unchanged(self, record: InputRecord) -> bool:
        """True if the baseline holds ``record``'s id with the same content hash."""
        known = self.hashes.get(record.id)
        return known is not None and known == content_hash(record.text, record.chunk_spans)

    def write_carried(self, job_id: str, carried_ids: set[str], ctx: JobContext) -> tuple[CarriedPart, ...]:
        """Copy the rows of ``carried_ids`` into ``job_id``'s carried parts; one per baseline part."""
        if not carried_ids:
            return ()
        wanted = pa.array(sorted(carried_ids), pa.string())
        layout = ctx.layout(job_id)
        parts, documents = [], 0
        for index, key in enumerate(self.part_keys):
            try:
                table = read_embeddings(ctx.store.get(key))
            except ObjectNotFoundError:
                raise BaselineChanged(f"{ctx.store.uri(key)} vanished while job {job_id} was planned") from None
            if "content_hash" not in table.column_names:
                continue
            kept = table.filter(pc.is_in(table.column("id"), value_set=wanted))
            if kept.num_rows == 0:
                continue
            target = layout.carried_part(index)
            ctx.store.put(target, write_embeddings(kept))
            parts.append(CarriedPart(key=target, rows=kept.num_rows, tokens=0, dimensions=self.dimensions))
            documents += len(pc.unique(kept.column("id")))
        if documents != len(carried_ids):
            raise BaselineChanged(
                f"job {self.job_id}'s parts changed while job {job_id} was planned: "
                f"{documents} of {len(carried_ids)} carried documents found"
            )
        return tuple(parts)
