"""``estimate_job``: what a job would cost, without submitting it. One streaming pass over the
input (``input_scan.py``), its stratified sample priced exactly (``sample_pricing.py``), each
stratum scaled by its own counts, then the time on the live workers (``worker_time.py``).

Memory is bounded by the sample (``Settings.estimates.estimate_sample_chars``) and the distinct counters
(exact up to a cap, then a fixed-size sketch); time by ``estimate_max_seconds`` for the pass and
the sample's size for the pricing. The caller runs checks first (``check_job``: the submission's
own), and runs this off the event loop (it reads and tokenizes for seconds).
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from poolq.jobs.context import JobContext
from poolq.jobs.planning.incremental import baseline_manifest
from poolq.jobs.reuse.reuse_scope import UNREUSABLE_TASKS
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.estimate.input_scan import InputScan, scan_input
from poolq.products.estimate.job_estimate import Duplicates, EstimateSample, JobEstimate, Reuse
from poolq.products.estimate.reuse_probe import ReuseProbe
from poolq.products.estimate.sample_pricing import PricedStratum, cost_model, price_stratum
from poolq.products.estimate.sample_tokenizer import SampleTokenizers
from poolq.products.estimate.tenant_reuse_probe import reuse_probe_for
from poolq.products.estimate.worker_time import worker_time

_TOKENIZERS = SampleTokenizers()  # one per process: a tokenizer loads in a second, then serves every estimate


def estimate_job(ctx: JobContext, spec: JobSpec, tenant: str, probe: ReuseProbe | None = None) -> JobEstimate:
    """The estimate of ``spec`` (already checked by ``check_job``) for ``tenant``."""
    probe = probe or reuse_probe_for(ctx, spec)
    scan = scan_input(ctx, spec, tenant)
    started = time.monotonic()
    tokenizer = _TOKENIZERS.get(ctx.registry.description_dir(spec.model))  # never the weights
    model = cost_model(spec, ctx.registry.spec(spec.model), tokenizer, ctx.settings.serving.max_chunks_per_document)
    hashes = [document.content_hash for stratum in scan.sample.strata for document in stratum.sample]
    reusable = dict(zip(hashes, probe.reusable(spec, tenant, hashes)))
    priced = [price_stratum(stratum, model, tokenizer, reusable) for stratum in scan.sample.strata if stratum.sample]
    estimate = _extrapolated(ctx, spec, scan, priced, probe.name, time.monotonic() - started)
    if baseline_manifest(ctx, spec, tenant) is None:
        return estimate
    return estimate.model_copy(update={"carries_from": spec.incremental_from})


def _scaled(stratum: PricedStratum) -> Counter[str]:
    """A stratum's sample scaled to the whole stratum: tokens by characters (within a stratum
    tokens follow characters closely), per-document counts by documents."""
    by_chars = stratum.characters / stratum.sampled_characters if stratum.sampled_characters else 0.0
    by_docs = stratum.documents / stratum.sampled
    scaled: Counter[str] = Counter({
        "tokens": stratum.tokens * by_chars, "document_tokens": stratum.document_tokens * by_chars,
        "reusable_tokens": stratum.reusable_tokens * by_chars, "rows": stratum.rows * by_docs,
        "truncated": stratum.truncated * by_docs, "chunked": stratum.chunked * by_docs, "split": stratum.split * by_docs,
    })
    scaled.update({f"failed:{code}": count * by_docs for code, count in stratum.failed.items()})
    return scaled


def _extrapolated(ctx: JobContext, spec: JobSpec, scan: InputScan, priced: list[PricedStratum], reuse_source: str,
                  price_seconds: float) -> JobEstimate:
    # Scaled to the whole input (a pass stopped early read part of it), then less the records
    # planning leaves out for a repeated id (it keeps one record of each: the first, or with
    # input.supersede the latest object's).
    whole = 1 / scan.fraction_read if scan.fraction_read else 1.0
    distinct_ids = scan.ids.count().distinct
    factor = whole * (distinct_ids / scan.documents if scan.documents else 1.0)
    sums: Counter[str] = Counter()
    for stratum in priced:
        sums.update(_scaled(stratum))
    totals = {name: round(value * factor) for name, value in sums.items()}
    failed = {name.removeprefix("failed:"): value for name, value in totals.items() if name.startswith("failed:")}
    failed.update({code: round(count * whole) for code, count in scan.invalid.items()})
    duplicate_ids, superseded = scan.id_repeats()
    if duplicate_ids:
        failed["duplicate_id"] = round(duplicate_ids * whole)
    distinct = scan.distinct.count()
    repeated = max(0, scan.documents - distinct.distinct)
    tokens = totals.get("tokens", 0)
    reusable_tokens = totals.get("reusable_tokens", 0)
    savings = _savings(scan, priced, tokens, repeated, reusable_tokens)
    repeated_tokens = savings.repeated
    computed = _computed_tokens(ctx, spec, tokens, savings)
    return JobEstimate(
        model=spec.model, task=spec.task_label, long_documents_mode=spec.long_documents.mode.value,
        documents=round((scan.documents - superseded) * whole), superseded=round(superseded * whole),
        characters=round(scan.characters * whole),
        tokens=tokens, computed_tokens=computed, document_tokens=totals.get("document_tokens", 0),
        rows=totals.get("rows", 0),
        failed={code: count for code, count in sorted(failed.items()) if count},
        truncated=totals.get("truncated", 0), chunked=totals.get("chunked", 0), split=totals.get("split", 0),
        duplicates=Duplicates(documents=round(repeated * whole), distinct=round(distinct.distinct * whole),
                              rate=repeated / scan.documents if scan.documents else 0.0, method=distinct.method,
                              tokens=repeated_tokens),
        reuse=Reuse(tokens=reusable_tokens, source=reuse_source),
        time=worker_time(ctx, spec.model, computed),
        sample=EstimateSample(documents=sum(s.sampled for s in priced), characters=sum(s.sampled_characters for s in priced),
                              fraction_read=round(scan.fraction_read, 4), scan_seconds=round(scan.seconds, 3),
                              price_seconds=round(price_seconds, 3)),
    )


@dataclass(frozen=True)
class _Savings:
    """What a job does not compute of its ``tokens``: its repeated texts (each text is computed once
    per job, docs/reuse.md), and the distinct texts already stored for the tenant."""

    repeated: int
    stored: int


def _savings(scan: InputScan, priced: list[PricedStratum], tokens: int, repeated: int, reusable: int) -> _Savings:
    """Summed document by document where the sample is the whole input (a small one: the estimate is
    then the job's ``usage.tokens`` exactly); else apportioned: repeats taken as long as the rest,
    and the stored share of ``tokens`` taken as the same among distinct texts."""
    if _whole(scan, priced):
        return _Savings(sum(s.tokens - s.distinct_tokens for s in priced), sum(s.distinct_reusable_tokens for s in priced))
    repeated_tokens = round(tokens * repeated / scan.documents) if scan.documents else 0
    return _Savings(repeated_tokens, round((tokens - repeated_tokens) * reusable / tokens) if tokens else 0)


def _whole(scan: InputScan, priced: list[PricedStratum]) -> bool:
    """Every document was read and priced, and planning refuses none as a repeated id (the sample
    keeps those, which the job drops)."""
    return (scan.fraction_read == 1.0 and all(s.sampled == s.documents for s in priced)
            and scan.ids.count().distinct == scan.documents)


def _computed_tokens(ctx: JobContext, spec: JobSpec, tokens: int, savings: _Savings) -> int:
    """What the workers would run (the job's ``usage.tokens``): ``tokens`` less its savings; a score
    job, or a service with reuse off, runs everything."""
    if spec.task_label in UNREUSABLE_TASKS or not ctx.settings.reuse.reuse_enabled:
        return tokens
    return max(0, tokens - savings.repeated - savings.stored)
