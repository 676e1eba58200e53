"""What the channels' routes share: reading a platform's request body within a limit."""

from __future__ import annotations

from fastapi import Request

from gateway.errors import ApiError, ErrorCode


async def read_limited(request: Request, limit: int) -> bytes:
    """The raw body (signatures are over the bytes as sent); 413 ``request_too_large`` as soon
    as it says or turns out to be longer than ``limit``, before the rest is read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(ErrorCode.REQUEST_TOO_LARGE, "The request is too large.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(ErrorCode.REQUEST_TOO_LARGE, "The request is too large.")
    return bytes(body)
