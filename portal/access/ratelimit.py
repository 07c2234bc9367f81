"""An atomic rate limit shared by every web process: a sliding-window counter in Redis.

One Lua script reads the current and the previous window's counts, estimates the requests of
the last window (the previous count weighted by how much of it is still inside) and counts
this request only when the estimate is below the limit, all in one step: concurrent
requests cannot both see the last free slot. Redis that is down or slow lets requests
through (logged): the limit protects the portal, it must never take the API down with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from portal.infra import shared_store

# KEYS[1]: the key's stem; ARGV: limit, window (ms). Windows are numbered by Redis' clock,
# so every web pod counts in the same windows.
SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local index = math.floor(now_ms / window)
local elapsed = now_ms - index * window
local current_key = KEYS[1] .. ':' .. index
local current = tonumber(redis.call('GET', current_key) or '0')
local previous = tonumber(redis.call('GET', KEYS[1] .. ':' .. (index - 1)) or '0')
local estimate = previous * (window - elapsed) / window + current
if estimate >= limit then
  return {0, window - elapsed}
end
redis.call('INCR', current_key)
redis.call('PEXPIRE', current_key, 2 * window)
return {1, 0}
"""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int  # seconds; 0 when allowed
    counted: bool  # False when Redis did not answer and the request went through uncounted


def hit(url: str, key: str, *, limit: int, window_seconds: int) -> Verdict:
    """Count one request against ``limit`` per ``window_seconds`` under ``key``."""
    try:
        allowed, wait_ms = shared_store.call(
            url,
            "the API rate limit",
            lambda r: r.eval(SCRIPT, 1, f"qm:rate:{key}", limit, window_seconds * 1000),
        )
    except shared_store.StoreDown:
        return Verdict(allowed=True, retry_after=0, counted=False)
    return Verdict(
        allowed=bool(allowed), retry_after=max(1, math.ceil(int(wait_ms) / 1000)), counted=True
    )
