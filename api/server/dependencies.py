"""What routes ask of a request, declared once as ``Annotated`` dependencies.

``Caller`` / ``AdminCaller``: the authenticated principal (``security.py``); ``Context``: the
process's job context; ``CallersJob``: the ``{job_id}`` of the path bound to a JobHandle, 404 for
no such job and for another tenant's (ids of other tenants' jobs are never confirmed).
"""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from poolq.api.server.guards.security import admin_caller, caller
from poolq.jobs import JobContext, JobHandle, JobNotFound, Principal


def _context(request: Request) -> JobContext:
    return request.app.state.ctx


Caller = Annotated[Principal, Depends(caller)]
AdminCaller = Annotated[Principal, Depends(admin_caller)]
Context = Annotated[JobContext, Depends(_context)]


def _callers_job(ctx: Context, job_id: str, principal: Caller) -> JobHandle:
    try:
        job = JobHandle.bind(ctx, job_id)
    except JobNotFound:
        job = None
    if job is None or job.tenant != principal.tenant:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id!r} not found")
    return job


CallersJob = Annotated[JobHandle, Depends(_callers_job)]
