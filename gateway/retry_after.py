"""How long an outside system asks the gateway to wait: its ``Retry-After`` header.

Microsoft Graph (the directory) and the Bot Connector (Teams) answer 429 or 503 with
``Retry-After``. RFC 9110 allows delta-seconds or an HTTP-date; both are read here. Every caller
has its own idea of how long is worth waiting and what to assume when the header is missing or
unreadable, so those are arguments: the answer always lies between ``floor`` and ``cap``, and a
server can neither stall a caller past its cap nor make it hammer back with a negative wait.
"""

from __future__ import annotations

import email.utils
import math
import time
from datetime import UTC


def retry_after_s(
    value: str | None,
    *,
    default: float,
    cap: float,
    floor: float = 0.0,
    now: float | None = None,
) -> float:
    """Seconds to wait, within ``[floor, cap]``: the header's delta-seconds, or the time from
    ``now`` (epoch seconds, the clock by default) to its HTTP-date; ``default`` when the header
    is missing or is neither."""
    seconds = _seconds(value, time.time() if now is None else now)
    return min(cap, max(floor, default if seconds is None else seconds))


def _seconds(value: str | None, now: float) -> float | None:
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return None if math.isnan(seconds) else seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": no zone given; an HTTP-date is GMT anyway
        when = when.replace(tzinfo=UTC)
    return when.timestamp() - now
