"""``/v1/schedules``: scheduled (incremental) reindex. Routes only translate HTTP <-> plain functions."""
from __future__ import annotations

from functools import partial

from fastapi import APIRouter, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel

from poolq.api.server.dependencies import AdminCaller, Context
from poolq.api.server.guards.estimate_pool import run_checks
from poolq.api.server.guards.security import ADMIN_RESPONSES
from poolq.api.server.guards.strict_json import StrictJsonRoute, strict_body
from poolq.api.server.schemas import ErrorBody, OpenApiResponses
from poolq.jobs import JobContext, JobRejected, Principal
from poolq.products import (
    RunView,
    Schedule,
    ScheduleRequest,
    create_schedule,
    delete_schedule,
    get_schedule,
    list_schedules,
    recent_runs,
    run_schedule,
    run_view,
)

# Schedules need an admin key; each tenant still sees only its own (others': 404).
router = APIRouter(prefix="/v1/schedules", tags=["schedules"], route_class=StrictJsonRoute, responses=ADMIN_RESPONSES)
_NOT_FOUND: OpenApiResponses = {404: {"model": ErrorBody, "description": "no such schedule (or another tenant's)"}}


class ScheduleList(BaseModel):
    schedules: list[Schedule]


class ScheduleDetail(Schedule):
    """A schedule with its recent runs, newest first."""

    runs: list[RunView]


def _schedule_or_404(ctx: JobContext, schedule_id: str, principal: Principal) -> Schedule:
    schedule = get_schedule(ctx, schedule_id, tenant=principal.tenant)
    if schedule is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"schedule {schedule_id!r} not found")
    return schedule


@router.post("", status_code=status.HTTP_201_CREATED, response_model=Schedule,
             responses={413: {"model": ErrorBody, "description": "body too large"}})
async def create(ctx: Context, body: ScheduleRequest, request: Request, response: Response,
                 principal: AdminCaller, _strict: None = strict_body(ScheduleRequest)) -> Schedule:
    """Store a schedule; beat runs it at every cron time (UTC), one job per slot."""
    try:
        schedule = await run_checks(request, partial(create_schedule, ctx, body, tenant=principal.tenant),
                                    estimates=body.template.limits is not None)
    except JobRejected as exc:
        loc = ("body", *exc.field.split("."))
        raise RequestValidationError([{"loc": loc, "msg": str(exc), "type": "value_error"}]) from None
    response.headers["Location"] = str(request.url_for("get_one", schedule_id=schedule.id))
    return schedule


@router.get("", response_model=ScheduleList)
def list_all(ctx: Context, principal: AdminCaller) -> ScheduleList:
    return ScheduleList(schedules=list_schedules(ctx, tenant=principal.tenant))


@router.get("/{schedule_id}", response_model=ScheduleDetail, responses=_NOT_FOUND)
def get_one(ctx: Context, schedule_id: str, principal: AdminCaller) -> ScheduleDetail:
    ctx = ctx
    schedule = _schedule_or_404(ctx, schedule_id, principal)
    return ScheduleDetail(**dict(schedule), runs=recent_runs(ctx, schedule_id))


@router.delete("/{schedule_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_NOT_FOUND)
def delete(ctx: Context, schedule_id: str, principal: AdminCaller) -> Response:
    """Delete the schedule and its run records; jobs it ran stay."""
    if not delete_schedule(ctx, schedule_id, tenant=principal.tenant):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"schedule {schedule_id!r} not found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{schedule_id}/run", status_code=status.HTTP_202_ACCEPTED, response_model=RunView,
             responses={**_NOT_FOUND, 409: {"model": ErrorBody, "description": "the template no longer fits this server"}})
def run_now(ctx: Context, schedule_id: str, principal: AdminCaller) -> RunView:
    """Run the schedule now (its slot is this second), incrementally like a scheduled run."""
    ctx = ctx
    _schedule_or_404(ctx, schedule_id, principal)
    try:
        run = run_schedule(ctx, schedule_id, manual=True)
    except JobRejected as exc:  # the template no longer fits this server (e.g. a model was removed)
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    if run is None:  # deleted in the meantime
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"schedule {schedule_id!r} not found")
    return run_view(ctx, run)
