"""Creating, listing and deleting schedules: the store first, then their RedBeat entries."""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone

from poolq.jobs.context import JobContext
from poolq.jobs.spec.job_status import LOCAL_TENANT
from poolq.jobs.steps.submit import JobRejected, check_job
from poolq.products.schedules.beat_entries import beat_for
from poolq.products.schedules.schedule import Schedule, ScheduleRequest
from poolq.products.schedules.schedule_store import ScheduleStore

_SCHEDULE_ID = re.compile(r"^[0-9a-f]{32}$")


def is_schedule_id(value: str) -> bool:
    """Schedule ids are 32 lowercase hex digits; anything else never reaches the store as a key."""
    return bool(_SCHEDULE_ID.match(value))


def _store(ctx: JobContext) -> ScheduleStore:
    return ScheduleStore(ctx.store, ctx.service_layout)


def create_schedule(
    ctx: JobContext, request: ScheduleRequest, now: datetime | None = None, *, tenant: str = LOCAL_TENANT
) -> Schedule:
    """Validate the job it would submit (as ``tenant``), store the schedule, add its beat entry.

    Raises :class:`JobRejected` whose ``field`` is a path in the request (``template.model``).
    """
    schedule = Schedule(
        id=uuid.uuid4().hex, tenant=tenant, created_at=now or datetime.now(timezone.utc), **dict(request)
    )
    try:
        spec = schedule.job_spec(incremental_from=None)
        check_job(ctx, spec, tenant)  # what each run's submission will check
    except JobRejected as exc:
        field = exc.field if exc.field.startswith(("input", "webhook")) else f"template.{exc.field}"
        raise JobRejected(field, str(exc)) from None
    _store(ctx).create(schedule)
    beat = beat_for(ctx)
    if beat is not None:
        beat.add(schedule)  # if this fails, the reconciler's next pass adds it
    return schedule


def get_schedule(ctx: JobContext, schedule_id: str, tenant: str | None = None) -> Schedule | None:
    """The schedule, or None if unknown (or, with ``tenant``, another tenant's)."""
    schedule = _store(ctx).get(schedule_id) if is_schedule_id(schedule_id) else None
    return None if schedule is None or (tenant is not None and schedule.tenant != tenant) else schedule


def list_schedules(ctx: JobContext, tenant: str | None = None) -> list[Schedule]:
    return [s for s in _store(ctx).list() if tenant is None or s.tenant == tenant]


def delete_schedule(ctx: JobContext, schedule_id: str, tenant: str | None = None) -> bool:
    """Delete the schedule, its run records (not its jobs) and its beat entry; False if unknown
    (or, with ``tenant``, another tenant's)."""
    if get_schedule(ctx, schedule_id, tenant) is None or not _store(ctx).delete(schedule_id):
        return False
    beat = beat_for(ctx)
    if beat is not None:
        beat.remove(schedule_id)  # if this fails, the reconciler's next pass removes the orphan
    return True
