"""HTTP for source plugins: throttling honoured, body size capped, errors an operator can act on.

Both Atlassian and Microsoft answer 429 (and Graph 503) with ``Retry-After`` in seconds when a
client goes too fast; :func:`send` waits that long and tries again, up to the source's
``max_retries``, and gives up (:class:`~indexer.sources.base.SourceError`: the run stops at its
last committed cursor) rather than wait longer than ``max_retry_after_s``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from indexer.sources.base import DocumentError, SourceError
from indexer.sources.config import SourceConfig

logger = logging.getLogger(__name__)

THROTTLED = frozenset({429, 503})
_DEFAULT_RETRY_AFTER_S = 5.0


class Unavailable(SourceError):
    """The system cannot be reached, or throttles past the retries: trying later may work."""


class TooLarge(DocumentError):
    """A response body longer than the source's ``max_document_bytes``."""


def retry_after(response: httpx.Response) -> float:
    """Seconds to wait, from ``Retry-After`` (seconds; an HTTP date or nothing: a default)."""
    value = response.headers.get("Retry-After", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return _DEFAULT_RETRY_AFTER_S


def send(
    client: httpx.Client,
    config: SourceConfig,
    method: str,
    url: str,
    *,
    system: str,
    sleep: Callable[[float], None] = time.sleep,
    **kwargs: Any,
) -> httpx.Response:
    """The response to one request, after waiting out throttling; the body is read only up to
    ``config.max_document_bytes`` (:class:`TooLarge` beyond). Connection errors and throttling
    that outlasts the retries raise :class:`SourceError`; other statuses are the caller's."""
    attempt = 0
    while True:
        try:
            with client.stream(method, url, **kwargs) as response:
                if response.status_code in THROTTLED and attempt < config.max_retries:
                    wait = retry_after(response)
                    if wait > config.max_retry_after_s:
                        raise Unavailable(
                            f"{system} asks to wait {wait:.0f} s (HTTP {response.status_code}), "
                            f"longer than max_retry_after_s ({config.max_retry_after_s:.0f} s)"
                        )
                else:
                    _read_capped(response, config.max_document_bytes)
                    if response.status_code in THROTTLED:
                        raise Unavailable(
                            f"{system} still answers HTTP {response.status_code} after "
                            f"{config.max_retries} retries"
                        )
                    return response
        except httpx.TransportError as exc:
            raise Unavailable(f"cannot reach {system}: {type(exc).__name__}") from None
        attempt += 1
        logger.info("%s throttled (attempt %d): waiting %.1f s", system, attempt, wait)
        sleep(wait)


def _read_capped(response: httpx.Response, limit: int) -> None:
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the response is {int(declared)} bytes, over max_document_bytes ({limit})")
    body = bytearray()
    for part in response.iter_bytes():
        body.extend(part)
        if len(body) > limit:
            raise TooLarge(f"the response exceeds max_document_bytes ({limit})")
    response._content = bytes(body)


def json_object(response: httpx.Response, system: str, error: type[Exception]) -> dict[str, Any]:
    """The response's JSON object; ``error`` (naming ``system``) for anything else."""
    try:
        value = response.json()
    except ValueError:
        raise error(f"{system} answered with something other than JSON") from None
    if not isinstance(value, dict):
        raise error(f"{system} answered with an unexpected JSON shape")
    return value
