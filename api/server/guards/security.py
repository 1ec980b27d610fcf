"""Who is calling, and may they: bearer-key authentication, scopes, rate limits (per tenant, and
per client address for failed authentications, so keys cannot be guessed at speed).

Routes declare ``principal: Caller`` (or ``AdminCaller``, both in ``dependencies.py``); they
then check ownership themselves and answer 404 for anything of another tenant, so ids of other
tenants' objects are never confirmed.
"""
from __future__ import annotations

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from poolq.api.server.guards.rate_limit import RateDecision, RateLimiter
from poolq.api.server.schemas import ErrorBody, OpenApiResponses
from poolq.jobs import ApiKeyStore, Principal

_bearer = HTTPBearer(auto_error=False, description="an API key: `poolq keys create --tenant T`")

# What `caller` / `admin_caller` may answer on any route that uses them (OpenAPI `responses=`).
AUTH_RESPONSES: OpenApiResponses = {
    401: {"model": ErrorBody, "description": "no API key, or not a valid one",
          "headers": {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Bearer`"}}},
    429: {"model": ErrorBody,
          "description": "the tenant is over its request rate, or the client address made too many failed authentications",
          "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait"}}},
}
ADMIN_RESPONSES: OpenApiResponses = {**AUTH_RESPONSES, 403: {"model": ErrorBody, "description": "the key lacks the admin scope"}}


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, message, headers={"WWW-Authenticate": "Bearer"})


def caller(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Principal:
    """The authenticated caller, rate-limited per tenant (401 / 429 otherwise).

    An address over its failed-authentication budget gets 429 before its key is even looked at,
    so a valid key guessed while throttled is not confirmed either.
    """
    if credentials is None:
        raise _unauthorized("send an API key: Authorization: Bearer <key>")
    address = request.client.host if request.client else "unknown"
    auth_failures: RateLimiter = request.app.state.auth_failures
    _check(auth_failures.peek(address), "too many failed authentications from this address")
    keys: ApiKeyStore = request.app.state.keys
    principal = keys.authenticate(credentials.credentials)
    if principal is None:
        auth_failures.take(address)
        raise _unauthorized("the API key is not valid (unknown, revoked or mistyped)")
    limiter: RateLimiter = request.app.state.limiter
    _check(limiter.take(principal.tenant), f"tenant {principal.tenant!r} is over its request rate")
    return principal


def _check(decision: RateDecision, what: str) -> None:
    if not decision.allowed:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{what}; retry in {decision.retry_after_s} s",
            headers={"Retry-After": str(decision.retry_after_s)},
        )


def admin_caller(principal: Principal = Depends(caller)) -> Principal:
    """A caller whose key has the admin scope (schedules and operations)."""
    if not principal.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this needs an admin key (poolq keys create --admin)")
    return principal
