"""Creating, listing and deleting schedules: the store first, then their RedBeat entries."""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone

from .context import JobContext
from .schedule_beat import beat_for
from .schedule_store import ScheduleStore
from .schedules import Schedule, ScheduleRequest
from .submit import JobRejected, validate_spec

_SCHEDULE_ID = re.compile(r"^[0-9a-f]{32}$")


def is_schedule_id(value: str) -> bool:
    """Schedule ids are 32 lowercase hex digits; anything else never reaches the store as a key."""
    return bool(_SCHEDULE_ID.match(value))


def _store(ctx: JobContext) -> ScheduleStore:
    return ScheduleStore(ctx.store, ctx.service_layout)


def create_schedule(request: ScheduleRequest, ctx: JobContext, now: datetime | None = None) -> Schedule:
    """Validate the job it would submit, store the schedule, add its beat entry.

    Raises :class:`JobRejected` whose ``field`` is a path in the request (``template.model``).
    """
    schedule = Schedule(id=uuid.uuid4().hex, created_at=now or datetime.now(timezone.utc), **dict(request))
    try:
        validate_spec(schedule.job_spec(incremental_from=None), ctx)
    except JobRejected as exc:
        field = exc.field if exc.field.startswith("input") else f"template.{exc.field}"
        raise JobRejected(field, str(exc)) from None
    _store(ctx).create(schedule)
    beat = beat_for(ctx)
    if beat is not None:
        beat.add(schedule)  # if this fails, the reconciler's next pass adds it
    return schedule


def get_schedule(schedule_id: str, ctx: JobContext) -> Schedule | None:
    return _store(ctx).get(schedule_id) if is_schedule_id(schedule_id) else None


def list_schedules(ctx: JobContext) -> list[Schedule]:
    return _store(ctx).list()


def delete_schedule(schedule_id: str, ctx: JobContext) -> bool:
    """Delete the schedule, its run records (not its jobs) and its beat entry; False if unknown."""
    if not is_schedule_id(schedule_id) or not _store(ctx).delete(schedule_id):
        return False
    beat = beat_for(ctx)
    if beat is not None:
        beat.remove(schedule_id)  # if this fails, the reconciler's next pass removes the orphan
    return True
