"""What every request passes through: body size, strict JSON, who calls (keys, scopes, rate limits, client
addresses), clients that go away, and outages answered 503 with ``Retry-After``."""
