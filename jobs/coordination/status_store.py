"""Job status and progress counters, a fast cache of the ledger: the interface and what both
implementations share (``redis_status_store.py``, ``memory_status_store.py``).

Everything here can be rebuilt from the object store (see ``poolq.jobs.status.current_status``). State changes are
compare-and-set against ``TRANSITIONS``; counters are idempotent per unit of work, so a
redelivered or repeated commit never counts twice.
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from datetime import datetime

from pydantic import TypeAdapter

from poolq.jobs.ledger.error_summary import ErrorSummary
from poolq.jobs.spec.job_state import TRANSITIONS, JobState
from poolq.jobs.spec.job_status import LOCAL_TENANT, JobCounts, JobEstimate, JobProgress, JobResult, JobStatus, JobUsage
from poolq.jobs.spec.reuse_counts import ReuseCounts
from poolq.jobs.spec.sink_config import SINK_OUTCOMES, sink_outcomes_json
from poolq.jobs.spec.webhook import WebhookOutcome

# What finished units add up: records embedded, failed, left unprocessed by a cancel; tokens through
# the model; the characters of the records they took (with tokens: the job's characters per token); and
# the documents copied by reuse, with the tokens they would have cost.
COUNTERS = ("completed", "failed", "not_processed", "tokens", "characters", "reused_documents", "reused_tokens")


@dataclass(frozen=True)
class UnitCounts:
    """The counters (``COUNTERS``) one finished unit adds, or a job's totals read from the ledger."""

    completed: int = 0
    failed: int = 0
    not_processed: int = 0
    tokens: int = 0
    characters: int = 0
    reused_documents: int = 0
    reused_tokens: int = 0

    def counters(self) -> dict[str, int]:
        """Counter name -> value, in ``COUNTERS``' order."""
        return asdict(self)


# Fields beside the counters: failed records by code, the first messages, a running unit's progress.
ERROR_FIELD = "error:"  # + code -> records failed with it
SAMPLES_FIELD = "error_samples"  # JSON list: the first messages (from the first unit that had errors)
# + unit -> "documents,tokens,planned_tokens,planned_chars" of a running unit, not yet counted: what it
# has done, and what the records it has tokenized so far will cost and how long they are
PROGRESS_FIELD = "progress:"
CHARACTERS_FIELD = "plan_characters"  # the characters of every record the plan sent to shards
# Before any text is tokenized: characters per token of English prose with WordPiece/BPE vocabularies.
DEFAULT_CHARS_PER_TOKEN = 4.0
# A reserved job gets its status within a submission; one still without it this long later died.
RESERVATION_GRACE_S = 120.0
TERMINAL_STATES = tuple(state.value for state in JobState if state.is_terminal)
# Stored timestamps are strings: parsed the way JobStatus' datetime fields parse them.
_TIMESTAMP = TypeAdapter(datetime)


class JobStatusStore(ABC):
    """Job status records, their state machine and their progress counters."""

    @abstractmethod
    def create(self, status: JobStatus) -> bool:
        """Create the record unless one exists; True if this call created it."""

    @abstractmethod
    def _read(self, job_id: str) -> dict[str, str] | None:
        """All fields of the job as strings, or None."""

    @abstractmethod
    def update(self, job_id: str, **fields: str | int | datetime) -> None:
        """Set plain fields (started_at, total, num_shards, manifest_uri, error, ...); never ``status``."""

    @abstractmethod
    def transition(self, job_id: str, target: JobState, **fields: str | int | datetime) -> bool:
        """Move to ``target`` if the current state allows it (and set ``fields``); False otherwise."""

    @abstractmethod
    def count_unit(self, job_id: str, unit: str, counts: UnitCounts, errors: ErrorSummary | None = None) -> int:
        """Add a finished unit's counts (and its errors by code) once, however often it is reported,
        and drop its progress; returns units counted."""

    @abstractmethod
    def set_counts(self, job_id: str, units: list[str], counts: UnitCounts, errors: ErrorSummary | None = None) -> None:
        """Overwrite the counters with totals read from the ledger (recovery, finalization); no
        unit is in progress any more."""

    @abstractmethod
    def note_progress(self, job_id: str, unit: str, documents: int, tokens: int, planned_tokens: int = 0,
                      planned_chars: int = 0) -> None:
        """A running unit has done this much so far (not counted until it finishes), and what the
        records it has tokenized cost (``planned_tokens``) and hold (``planned_chars``). Ignored
        once the unit is counted, or when the job has no status (a finished job's record expired)."""

    @abstractmethod
    def note_dispatch(self, job_id: str, units: list[str], at: float) -> None:
        """Record when tasks for ``units`` were last sent (the reconciler re-sends lost ones)."""

    @abstractmethod
    def dispatches(self, job_id: str) -> dict[str, float]:
        """Unit -> when its task was last sent."""

    @abstractmethod
    def drop_dispatch(self, job_id: str, unit: str) -> None:
        """``unit`` is counted: its send time no longer matters (the record stays O(shards in flight))."""

    @abstractmethod
    def forget(self, job_id: str) -> None:
        """Drop the job's bookkeeping that only matters while it runs (dispatch times)."""

    @abstractmethod
    def expire(self, job_id: str, ttl_s: float) -> None:
        """The job is finished: its cached status and counters go after ``ttl_s`` (the ledger keeps
        the truth, and a later read rebuilds the status from it)."""

    @abstractmethod
    def add_active(self, tenant: str, job_id: str) -> None:
        """Count ``job_id`` against its tenant's cap on unfinished jobs."""

    @abstractmethod
    def reserve_active(self, tenant: str, job_id: str, cap: int, now: float) -> int | None:
        """Count ``job_id`` against its tenant's cap if the tenant has fewer than ``cap`` unfinished
        jobs, as one atomic step (concurrent submissions can never pass the cap together); None
        if reserved, else how many unfinished jobs the tenant has.

        On the way, members that finished are dropped, and so are members without a status whose
        reservation is older than ``RESERVATION_GRACE_S`` (a submission that died half-way)."""

    @abstractmethod
    def remove_active(self, tenant: str, job_id: str) -> None: ...

    @abstractmethod
    def active_ids(self, tenant: str) -> list[str]: ...

    @abstractmethod
    def all_active_ids(self) -> list[str]:
        """Every tenant's active jobs (for the metrics' unfinished-jobs gauge)."""

    def advance_to(self, job_id: str, target: JobState, **fields: str | int | datetime) -> bool:
        """Walk the state machine to ``target`` (through running or cancelling if needed).

        Used when the ledger already decided the outcome (a manifest exists) but the cached
        state lags behind, e.g. after Redis lost it. Terminal states are never left.
        """
        for _ in range(len(TRANSITIONS)):
            current = self.get(job_id)
            if current is None or current.status.is_terminal or current.status == target:
                return current is not None and current.status == target
            if current.status.can_become(target):
                if self.transition(job_id, target, **fields):
                    return True
                continue  # lost a race: look again
            step = next(
                (via for via in (JobState.RUNNING, JobState.CANCELLING)
                 if current.status.can_become(via) and via.can_become(target)),
                None,
            )
            if step is None:
                return False
            self.transition(job_id, step)
        return False

    def get(self, job_id: str) -> JobStatus | None:
        fields = self._read(job_id)
        if not fields or "status" not in fields:
            return None
        total = fields.get("total")
        manifest_uri = fields.get("manifest_uri")
        return JobStatus(
            id=job_id,
            tenant=fields.get("tenant", LOCAL_TENANT),
            status=JobState(fields["status"]),
            model=fields["model"],
            task=fields["task"],
            counts=JobCounts(
                total=int(total) if total else None,
                completed=int(fields.get("completed", 0)),
                failed=int(fields.get("failed", 0)),
                not_processed=int(fields.get("not_processed", 0)),
            ),
            usage=JobUsage(tokens=int(fields.get("tokens", 0))),
            estimate=token_estimate(fields),
            created_at=_TIMESTAMP.validate_python(fields["created_at"]),
            started_at=_optional_timestamp(fields.get("started_at")),
            finished_at=_optional_timestamp(fields.get("finished_at")),
            result=JobResult(manifest_uri=manifest_uri) if manifest_uri else None,
            error=fields.get("error") or None,
            errors_by_code={name[len(ERROR_FIELD):]: int(value) for name, value in fields.items()
                            if name.startswith(ERROR_FIELD) and int(value)},
            error_samples=json.loads(fields.get(SAMPLES_FIELD) or "[]"),
            in_progress=_in_progress(fields),
            webhook=WebhookOutcome.model_validate_json(fields["webhook"]) if fields.get("webhook") else None,
            reuse=_reuse(fields),
            sinks=SINK_OUTCOMES.validate_json(fields["sinks"]) if fields.get("sinks") else None,
        )

    def field(self, job_id: str, name: str) -> str | None:
        return (self._read(job_id) or {}).get(name)


def _reuse(fields: dict[str, str]) -> ReuseCounts | None:
    """The manifest's counts once the job ended; before, what its counted units add up to (None until one is)."""
    if fields.get("reuse"):
        return ReuseCounts.model_validate_json(fields["reuse"])
    if "reused_documents" not in fields:
        return None
    return ReuseCounts(reused_documents=int(fields["reused_documents"]), reused_tokens=int(fields.get("reused_tokens", 0)),
                       computed_tokens=int(fields.get("tokens", 0)))


def _running(fields: dict[str, str]) -> list[list[int]]:
    """Each running unit's ``[documents, tokens, planned_tokens, planned_chars]``."""
    return [[int(number) for number in value.split(",")] + [0] * (3 - value.count(","))
            for name, value in fields.items() if name.startswith(PROGRESS_FIELD)]


def _in_progress(fields: dict[str, str]) -> JobProgress:
    running = _running(fields)
    return JobProgress(documents=sum(unit[0] for unit in running), tokens=sum(unit[1] for unit in running))


def token_estimate(fields: dict[str, str]) -> JobEstimate:
    """The job's tokens in all: what finished and running units have tokenized, plus the characters
    still to go at the characters per token measured on everything tokenized so far."""
    total_chars = fields.get(CHARACTERS_FIELD)
    if total_chars is None:  # not planned yet
        return JobEstimate()
    if fields.get("status") in TERMINAL_STATES:  # what it took, exactly
        return JobEstimate(tokens=int(fields.get("tokens", 0)), measured=True)
    running = _running(fields)
    committed_tokens, committed_chars = int(fields.get("tokens", 0)), int(fields.get("characters", 0))
    done = committed_tokens + sum(unit[1] for unit in running)
    planned_tokens = committed_tokens + sum(unit[2] for unit in running)
    planned_chars = committed_chars + sum(unit[3] for unit in running)
    chars_per_token = planned_chars / planned_tokens if planned_tokens and planned_chars else DEFAULT_CHARS_PER_TOKEN
    untokenized = max(0, int(total_chars) - planned_chars)
    return JobEstimate(tokens=max(done, planned_tokens + round(untokenized / chars_per_token)),
                       measured=planned_tokens > 0)


def error_fields(errors: ErrorSummary | None) -> dict[str, str]:
    """The fields a unit's (or the ledger's) errors add: a count per code."""
    return {} if errors is None else {ERROR_FIELD + code: str(count) for code, count in errors.codes.items()}


def samples_field(errors: ErrorSummary | None) -> str:
    return json.dumps(list(errors.samples)) if errors is not None and errors.samples else ""


def _optional_timestamp(stored: str | None) -> datetime | None:
    """A stored timestamp; None where it is absent or empty (not reached yet)."""
    return _TIMESTAMP.validate_python(stored) if stored else None


def flatten_status(status: JobStatus) -> dict[str, str]:
    fields = {
        "status": status.status.value,
        "tenant": status.tenant,
        "model": status.model,
        "task": status.task,
        "created_at": status.created_at.isoformat(),
    }
    for name, value in (("started_at", status.started_at), ("finished_at", status.finished_at)):
        if value is not None:
            fields[name] = value.isoformat()
    if status.counts.total is not None:
        fields["total"] = str(status.counts.total)
    if status.result is not None:
        fields["manifest_uri"] = status.result.manifest_uri
    if status.error:
        fields["error"] = status.error
    if status.webhook is not None:
        fields["webhook"] = status.webhook.model_dump_json()
    if status.reuse is not None:
        fields["reuse"] = status.reuse.model_dump_json()
    if status.sinks:
        fields["sinks"] = sink_outcomes_json(status.sinks)
    return fields


def _as_str(value: str | int | datetime) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, JobState):
        return value.value
    return str(value)


def plain_fields(fields: dict) -> dict[str, str]:
    if "status" in fields:
        raise ValueError("status changes go through transition()")
    return {name: _as_str(value) for name, value in fields.items()}
