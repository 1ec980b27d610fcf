"""Incremental runs: carry documents unchanged since an earlier run instead of embedding them.

A job with ``incremental_from`` names an earlier job. If that job finished (succeeded or
partially succeeded) with the same model and options, and its vectors were all made by the engine
that would make them now (the model files' fingerprint and the compute dtype: see
``JobContext.engine_identity``; a name pointing at new files changes it), its output is the
*baseline*: a document of the new input whose id and carry key (its content hash, and the values
of the fields its rows carry: ``carry_key.py``) match a baseline row is *carried*: its rows are
copied into ``parts/carried-NNNNN.parquet`` of the new job (one per baseline part), so the new
run's manifest lists every document, like a full run's. A baseline whose carried fields' columns
have other types than this job's carries nothing (its parts would not fit beside the job's).

Memory: the baseline's ``(id, carry key)`` are spilled into the planner's id partitions
(``id_partitions.py``) one part at a time and compared one partition at a time; carried rows are
copied one baseline part at a time. Nothing is held for the whole baseline.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.job_ledger import CarriedPart
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.planning.carry_key import BaselineUnfit, spill_baseline_part
from poolq.jobs.planning.id_partitions import Decisions, IdPartitions, read_ids
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.output_effect import OutputEffect, counted_options
from poolq.storage import ObjectNotFoundError, read_embeddings, write_embeddings

log = logging.getLogger(__name__)

USABLE_STATES = frozenset({JobState.SUCCEEDED, JobState.PARTIALLY_SUCCEEDED})


class BaselineChanged(RuntimeError):
    """A baseline part vanished or changed while planning: carried rows would be missing."""


# What a baseline's options must share with the job's (jobs/spec/output_effect.py declares each field's
# effect): the engine's fields are left to the engine identities, compared below (what the rows were computed in).
ROW_COUNTS = frozenset({OutputEffect.VALUES, OutputEffect.ROWS})


def comparable_options(options: dict) -> dict:
    """A manifest's (or spec's) options without what does not change the rows."""
    return counted_options(options, ROW_COUNTS)


def baseline_manifest(ctx: JobContext, spec: JobSpec, tenant: str) -> JobManifest | None:
    """The manifest of ``spec.incremental_from`` (a job of the same tenant, as submission checked)
    if its rows can be carried into a job of ``spec``."""
    if spec.incremental_from is None:
        return None
    manifest = JobHandle.of_tenant(ctx, spec.incremental_from, tenant).ledger.manifest()
    if manifest is None or manifest.status not in USABLE_STATES:
        log.info("incremental_from %s: not finished successfully; embedding everything", spec.incremental_from)
        return None
    options = comparable_options(spec.model_dump(mode="json"))
    if manifest.model != spec.model or comparable_options(manifest.options) != options:
        log.info("incremental_from %s: other model or options; embedding everything", spec.incremental_from)
        return None
    engine = ctx.engines.identity(spec.model, spec.compute_dtype)
    if manifest.engines != [engine]:
        log.info("incremental_from %s: made by %s, not %s (other model files or dtype); embedding everything",
                 spec.incremental_from, manifest.engines, engine)
        return None
    return manifest


@dataclass
class Baseline:
    """The earlier run whose rows may be carried: its parts, read one at a time (never whole)."""

    job_id: str
    part_keys: tuple[str, ...]
    dimensions: int | None

    @classmethod
    def load(cls, job: JobHandle, partitions: IdPartitions, field_types: dict[str, str]) -> "Baseline | None":
        """The baseline of ``job``, its documents spilled into ``partitions``; None when it has none,
        cannot use it, or its output is gone (then nothing of it is left in ``partitions``).
        ``field_types``: the job's carried fields' types (``carry_key.py`` compares their values too)."""
        manifest = baseline_manifest(job.ctx, job.spec, job.tenant)
        if manifest is None:
            return None
        baseline = cls(job.spec.incremental_from or "", tuple(part.key for part in manifest.parts), manifest.dimensions)
        try:
            for index, key in enumerate(baseline.part_keys):
                spill_baseline_part(job.ctx.store, key, index, partitions, field_types)
        except (ObjectNotFoundError, BaselineUnfit) as exc:
            # The parts spilled before this one must not count: their documents would be left out as
            # carried, and no carried part would hold them
            partitions.discard_baseline()
            log.warning("incremental_from %s: %s; embedding everything", baseline.job_id, exc)
            return None
        return baseline

    def write_carried(self, job: JobHandle, decisions: Decisions) -> tuple[CarriedPart, ...]:
        """Copy the carried documents' rows into ``job.id``'s carried parts, one per baseline part
        (each part's carried ids are read from the partitions' decisions: one part in memory)."""
        ctx = job.ctx
        layout = job.layout
        parts, documents = [], 0
        for index, ids_path in sorted(decisions.carried_by_part.items()):
            key = self.part_keys[index]
            try:
                table = read_embeddings(ctx.store.get(key))
            except ObjectNotFoundError:
                raise BaselineChanged(f"{ctx.store.uri(key)} vanished while job {job.id} was planned") from None
            kept = table.filter(pc.is_in(table.column("id"), value_set=pa.array(read_ids(ids_path), pa.string())))
            target = layout.carried_part(index)
            ctx.store.put(target, write_embeddings(kept))
            parts.append(CarriedPart(key=target, rows=kept.num_rows, tokens=0, dimensions=self.dimensions))
            documents += len(pc.unique(kept.column("id")))
        if documents != decisions.carried:
            raise BaselineChanged(
                f"job {self.job_id}'s parts changed while job {job.id} was planned: "
                f"{documents} of {decisions.carried} carried documents found"
            )
        return tuple(parts)
