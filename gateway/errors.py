"""One error type for the API, rendered as ``{"error_code", "detail"}``."""

from __future__ import annotations

from enum import StrEnum

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError


class ErrorCode(StrEnum):
    INVALID_REQUEST = "invalid_request"
    EMPTY_MESSAGE = "empty_message"
    MESSAGE_TOO_LONG = "message_too_long"
    INVALID_JSON = "invalid_json"
    UNKNOWN_TURN = "unknown_turn"
    TURN_TIMEOUT = "turn_timeout"
    BUS_UNAVAILABLE = "bus_unavailable"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    RATE_LIMITED = "rate_limited"
    IDENTITY_UNAVAILABLE = "identity_unavailable"
    FILE_TOO_LARGE = "file_too_large"
    UNSUPPORTED_FILE_TYPE = "unsupported_file_type"
    UNKNOWN_DOCUMENT = "unknown_document"
    UNKNOWN_ATTACHMENT = "unknown_attachment"
    UNKNOWN_CONVERSATION = "unknown_conversation"
    TOO_MANY_UPLOADS = "too_many_uploads"
    UPLOADS_BUSY = "uploads_busy"
    UNKNOWN_PROPOSAL = "unknown_proposal"
    CORRUPT_FILE = "corrupt_file"
    UNKNOWN_TICKET = "unknown_ticket"
    VERSION_CONFLICT = "version_conflict"
    REQUEST_TOO_LARGE = "request_too_large"
    UNKNOWN_SOURCE = "unknown_source"


STATUS = {
    ErrorCode.INVALID_REQUEST: 422,
    ErrorCode.EMPTY_MESSAGE: 422,
    ErrorCode.MESSAGE_TOO_LONG: 413,
    ErrorCode.INVALID_JSON: 400,
    ErrorCode.UNKNOWN_TURN: 404,
    ErrorCode.TURN_TIMEOUT: 504,
    ErrorCode.BUS_UNAVAILABLE: 503,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.IDENTITY_UNAVAILABLE: 503,
    ErrorCode.FILE_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_FILE_TYPE: 415,
    ErrorCode.UNKNOWN_DOCUMENT: 404,
    ErrorCode.UNKNOWN_ATTACHMENT: 404,
    ErrorCode.UNKNOWN_CONVERSATION: 404,
    ErrorCode.TOO_MANY_UPLOADS: 429,
    ErrorCode.UPLOADS_BUSY: 503,
    ErrorCode.UNKNOWN_PROPOSAL: 404,
    ErrorCode.CORRUPT_FILE: 422,
    ErrorCode.UNKNOWN_TICKET: 404,
    ErrorCode.VERSION_CONFLICT: 409,
    ErrorCode.REQUEST_TOO_LARGE: 413,
    ErrorCode.UNKNOWN_SOURCE: 404,
}


class ApiError(Exception):
    """``extra`` goes into the body; ``headers`` into the response (``Retry-After``)."""

    def __init__(
        self, code: ErrorCode, detail: str, *, headers: dict[str, str] | None = None, **extra: str
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.extra = extra
        self.headers = headers or {}

    def payload(self) -> dict[str, str]:
        return {"error_code": self.code.value, "detail": self.detail, **self.extra}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        # RFC 9110: a 401 names the scheme the client should use.
        headers = dict(exc.headers)
        if exc.code is ErrorCode.UNAUTHORIZED:
            headers["WWW-Authenticate"] = "Bearer"
        return JSONResponse(exc.payload(), status_code=STATUS[exc.code], headers=headers)

    @app.exception_handler(RedisError)
    async def _bus_down(_: Request, exc: RedisError) -> JSONResponse:
        # Redis restarting (connection refused, still loading its AOF) wherever it surfaces: the
        # request was not taken; the client may retry. Never a bare 500.
        error = ApiError(
            ErrorCode.BUS_UNAVAILABLE, f"the message bus is unavailable ({type(exc).__name__})"
        )
        return JSONResponse(
            error.payload(), status_code=STATUS[error.code], headers={"Retry-After": "1"}
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"] if part != "body") or "body"
            problems.append(f"{where}: {error['msg']}")
        code = ErrorCode.INVALID_REQUEST
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            code = ErrorCode.INVALID_JSON
        return JSONResponse(
            {"error_code": code.value, "detail": "; ".join(problems)}, status_code=STATUS[code]
        )
