"""Structured JSON logs that tie every line to its service, node, trace and turn.

The bus sets the correlation and conversation ids of the event being handled in context
variables, and the formatter reads the active OpenTelemetry span, so handlers just log.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import signal
import sys
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

correlation_id_var: ContextVar[str | None] = ContextVar("correlation_id", default=None)
conversation_id_var: ContextVar[str | None] = ContextVar("conversation_id", default=None)

_RESERVED = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: easy to ship, grep and join on trace or correlation id."""

    def __init__(self, service: str, node: str) -> None:
        super().__init__()
        self.service = service
        self.node = node

    def format(self, record: logging.LogRecord) -> str:
        span_context = trace.get_current_span().get_span_context()
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "service": self.service,
            "node": self.node,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if span_context.is_valid:
            entry["trace_id"] = format(span_context.trace_id, "032x")
            entry["span_id"] = format(span_context.span_id, "016x")
        if (correlation_id := correlation_id_var.get()) is not None:
            entry["correlation_id"] = correlation_id
        if (conversation_id := conversation_id_var.get()) is not None:
            entry["conversation_id"] = conversation_id
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            # The exception type and where it happened, never its message: messages can carry
            # user text that must not reach the logs.
            # Frames only (file, line, function): source lines can quote the data too.
            exc_type, _, tb = record.exc_info
            entry["exc_type"] = exc_type.__name__ if exc_type else None
            entry["exc_frames"] = [
                f"{frame.filename}:{frame.lineno} in {frame.name}"
                for frame in traceback.extract_tb(tb)
            ]
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(service: str, node: str, level: str = "INFO") -> None:
    """Route every logger of the process to stderr as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service, node))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "urllib3", "chromadb.telemetry"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Libraries whose debug lines quote the data they handle: Presidio prints the words around
    # every entity it weighs, and the WebSocket protocol prints the frames it receives (the
    # user's raw message). They stay quiet at any LOG_LEVEL.
    for quoting in PAYLOAD_LOGGERS:
        logging.getLogger(quoting).setLevel(max(logging.INFO, root.level))


def enable_stack_dumps() -> None:
    """Let a crashed or stuck process show where it was, in its log (stderr).

    A fatal signal (SIGSEGV, SIGBUS, SIGABRT, ...) writes every thread's Python stack before the
    process dies, and ``kill -USR1 <pid>`` writes them and lets it run on. Frames only (file,
    line, function), never a value, so no user text reaches the log this way."""
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


PAYLOAD_LOGGERS = ("presidio-analyzer", "presidio-anonymizer", "websockets", "uvicorn.error")
"""Loggers that write message content at DEBUG; never below INFO."""
