"""A local OpenAI Chat Completions server over real HTTP, for testing the LLM plugin.

It implements ``POST /v1/chat/completions`` as the OpenAI API reference documents it: bearer
authentication, request validation (model, messages, temperature, response_format, stream),
``chat.completion`` objects, streamed ``chat.completion.chunk`` server-sent events ending with
``data: [DONE]``, and errors in the documented shape
``{"error": {"message", "type", "param", "code"}}``.

What it answers is scripted per test: :meth:`FakeOpenAI.enqueue` queues the next replies (text,
errors, delays, broken streams); with nothing queued, ``responder`` chooses the reply (text or a
:class:`Reply`) from the request, which suits callers whose requests interleave, such as a whole
stack. Deskpilot's critique of a drafted answer is a JSON-mode request (``response_format``
``json_object``) like any decision: :func:`critique` writes its reply, :func:`critiqued_parts`
reads which parts of the draft a request asks about (for a ``responder`` that judges them), and
:func:`cut_off` is the one way the real API returns invalid JSON in JSON mode. Every request is
recorded with its headers for assertions. Other paths answer 404 and
other methods 405, in the same error shape. It is a Starlette app served by
:mod:`tests.support.served`.

    with FakeOpenAI() as server:
        server.enqueue(Reply("Hello [1]"), rate_limited(retry_after="1"))
        ...  # point the provider at server.base_url
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.served import ServedFake

TEST_KEY = "sk-test-0123456789abcdef"
"""The API key the server accepts unless told otherwise."""
ROLES = ("system", "user", "assistant", "tool", "developer")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")


@dataclass
class Reply:
    """What the server does with the next request that passes validation."""

    content: str = "OK"
    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    """Wait before answering (before the first event, when streaming)."""
    chunks: list[str] | None = None
    """Streamed deltas; by default the content split after each space."""
    chunk_delay_s: float = 0.0
    """Wait before each streamed delta after the first, like a model generating tokens."""
    raw_body: str | None = None
    """Sent as is with status 200 instead of a completion (a broken server)."""
    cut_stream: bool = False
    """End the stream after the content, without a finish_reason or [DONE]."""
    finish_reason: str = "stop"


@dataclass
class Recorded:
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))


def error_body(
    message: str, type_: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def rate_limited(retry_after: str | None = "1", retry_after_ms: str | None = None) -> Reply:
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    if retry_after_ms is not None:
        headers["retry-after-ms"] = retry_after_ms
    return Reply(
        status=429,
        headers=headers,
        error=error_body(
            "Rate limit reached for requests. Please try again later.",
            "requests",
            code="rate_limit_exceeded",
        ),
    )


def server_error(status: int = 500) -> Reply:
    return Reply(
        status=status,
        error=error_body(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
        ),
    )


def invalid_request(message: str, param: str | None = None, code: str | None = None) -> Reply:
    return Reply(status=400, error=error_body(message, "invalid_request_error", param, code))


Responder = Callable[[dict[str, Any]], Reply | str]
"""Chooses the reply to a valid request body when nothing is queued."""


def reading(**changes: Any) -> str:
    """A valid reply to Deskpilot's message-reading prompt (``orchestrator.llm.read_message``):
    an in-scope informational request of category "other", with ``changes`` (valid or not)."""
    values = {
        "in_scope": True,
        "conversational": False,
        "kind": "informational",
        "category": "other",
        "wants_human": False,
    }
    return json.dumps({**values, **changes})


def critique(supported: Sequence[bool], confidence: float) -> str:
    """A reply to Deskpilot's critique prompt (``orchestrator.llm.critique``): a verdict for each
    numbered part of the draft, in order, and the judge's confidence (valid or not)."""
    parts = [{"n": n, "supported": flag} for n, flag in enumerate(supported, start=1)]
    return json.dumps({"parts": parts, "confidence": confidence})


def json_mode(body: dict[str, Any]) -> bool:
    """Whether a request asks for a JSON reply (``response_format`` json_object or json_schema),
    as the decision and critique calls do and drafting an answer does not."""
    response_format = body.get("response_format")
    return isinstance(response_format, dict) and response_format.get("type") != "text"


_PART = re.compile(r"<part (\d+)>\n(.*?)\n</part \1>", re.DOTALL)


def critiqued_parts(body: dict[str, Any]) -> list[str]:
    """The numbered parts of the draft a critique request asks about, in order ([] for any other
    request)."""
    messages = body.get("messages") or []
    last = str(messages[-1].get("content", "")) if messages else ""
    return [match.group(2) for match in _PART.finditer(last)]


def cut_off(content: str) -> Reply:
    """A completion stopped at the token limit: in JSON mode the API then returns the JSON as
    far as it got (``finish_reason`` "length"), which is not valid JSON."""
    return Reply(content[: max(1, len(content) // 2)], finish_reason="length")


def _words(text: str) -> int:
    return len(text.split())


class FakeOpenAI(ServedFake):
    """The server; start it with ``with`` or :meth:`start`, stop it with :meth:`stop`."""

    def __init__(
        self,
        api_key: str | None = TEST_KEY,
        models: tuple[str, ...] = ("fake-model",),
    ) -> None:
        self.api_key = api_key
        self.models = set(models)
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.responder: Responder = lambda body: "OK"

    # --- scripting ---------------------------------------------------------------------------

    def enqueue(self, *replies: Reply | str) -> None:
        for reply in replies:
            self.replies.append(Reply(reply) if isinstance(reply, str) else reply)

    def reset(self, api_key: str | None = TEST_KEY) -> None:
        self.replies.clear()
        self.requests.clear()
        self.responder = lambda body: "OK"
        self.api_key = api_key

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as its base URL: the API lives under ``/v1``."""
        return f"{self.origin}/v1"

    # --- the endpoint --------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[Route("/v1/chat/completions", self._chat_completions, methods=["POST"])],
            exception_handlers={404: self._no_route, 405: self._no_route},
        )

    async def _no_route(self, request: Request, exc: Exception) -> Response:
        """Starlette's 404 and 405 as OpenAI words them."""
        where = f"({request.method} {request.url.path})"
        if isinstance(exc, HTTPException) and exc.status_code == 405:
            return JSONResponse(
                error_body(f"Invalid method for URL {where}", "invalid_request_error"),
                status_code=405,
            )
        return JSONResponse(
            error_body(f"Invalid URL {where}", "invalid_request_error"), status_code=404
        )

    async def _chat_completions(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        self.requests.append(
            Recorded(body=body if isinstance(body, dict) else {}, headers=dict(request.headers))
        )
        if problem := self._unauthorized(request.headers.get("authorization")):
            return JSONResponse(problem, status_code=401)
        if not isinstance(body, dict):
            return JSONResponse(
                error_body(
                    "We could not parse the JSON body of your request. (HINT: This likely "
                    "means you aren't using your HTTP library correctly.)",
                    "invalid_request_error",
                ),
                status_code=400,
            )
        if problem := self._invalid(body):
            return JSONResponse(problem, status_code=400)
        if body["model"] not in self.models:
            return JSONResponse(
                error_body(
                    f"The model `{body['model']}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    code="model_not_found",
                ),
                status_code=404,
            )
        if self.replies:
            reply = self.replies.popleft()
        else:
            chosen = self.responder(body)
            reply = chosen if isinstance(chosen, Reply) else Reply(chosen)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200:
            return JSONResponse(
                reply.error or error_body("error", "server_error"),
                status_code=reply.status,
                headers=reply.headers,
            )
        if reply.raw_body is not None:
            return Response(reply.raw_body, media_type="application/json")
        if body.get("stream"):
            return StreamingResponse(
                self._events(body, reply),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", **reply.headers},
            )
        return JSONResponse(self._completion(body, reply), headers=reply.headers)

    def _unauthorized(self, authorization: str | None) -> dict[str, Any] | None:
        if self.api_key is None:
            return None
        if not authorization:
            return error_body(
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                "invalid_request_error",
            )
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() != "bearer" or key != self.api_key:
            masked = f"{key[:3]}***{key[-2:]}" if len(key) > 5 else "***"
            return error_body(
                f"Incorrect API key provided: {masked}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                code="invalid_api_key",
            )
        return None

    @staticmethod
    def _invalid(body: dict[str, Any]) -> dict[str, Any] | None:
        """The documented request checks, with OpenAI's messages."""
        if not isinstance(body.get("model"), str) or not body["model"]:
            return error_body("you must provide a model parameter", "invalid_request_error")
        messages = body.get("messages")
        if messages is None:
            return error_body(
                "Missing required parameter: 'messages'.",
                "invalid_request_error",
                "messages",
                "missing_required_parameter",
            )
        if not isinstance(messages, list) or not messages:
            return error_body(
                "Invalid 'messages': empty array. Expected an array with minimum length 1.",
                "invalid_request_error",
                "messages",
                "empty_array",
            )
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ROLES:
                return error_body(
                    f"Invalid value for 'messages[{i}].role'. Supported values are: "
                    + ", ".join(f"'{role}'" for role in ROLES)
                    + ".",
                    "invalid_request_error",
                    f"messages[{i}].role",
                    "invalid_value",
                )
            if not isinstance(message.get("content"), str | list):
                return error_body(
                    f"Missing required parameter: 'messages[{i}].content'.",
                    "invalid_request_error",
                    f"messages[{i}].content",
                    "missing_required_parameter",
                )
        temperature = body.get("temperature", 1)
        if not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
            return error_body(
                f"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, "
                f"but got {temperature} instead.",
                "invalid_request_error",
                "temperature",
                "decimal_above_max_value",
            )
        if not isinstance(body.get("stream", False), bool):
            return error_body(
                "Invalid type for 'stream': expected a boolean.",
                "invalid_request_error",
                "stream",
                "invalid_type",
            )
        response_format = body.get("response_format")
        if response_format is not None:
            kind = response_format.get("type") if isinstance(response_format, dict) else None
            if kind not in RESPONSE_FORMATS:
                return error_body(
                    "Invalid value for 'response_format.type'.",
                    "invalid_request_error",
                    "response_format.type",
                    "invalid_value",
                )
            text = " ".join(str(message.get("content", "")) for message in messages).lower()
            if kind == "json_object" and "json" not in text:
                return error_body(
                    "'messages' must contain the word 'json' in some form, to use "
                    "'response_format' of type 'json_object'.",
                    "invalid_request_error",
                    "messages",
                )
        return None

    @staticmethod
    def _usage(body: dict[str, Any], content: str) -> dict[str, int]:
        prompt = sum(_words(str(m.get("content", ""))) for m in body["messages"])
        completion = _words(content)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": self._usage(body, reply.content),
        }

    async def _events(self, body: dict[str, Any], reply: Reply) -> AsyncIterator[str]:
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
            event = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body["model"],
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            return f"data: {json.dumps(event)}\n\n"

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        pieces = reply.chunks
        if pieces is None:
            pieces = [word + " " for word in reply.content.split(" ")]
            pieces[-1] = pieces[-1][:-1]
        for i, piece in enumerate(pieces):
            await asyncio.sleep(reply.chunk_delay_s if i else 0)
            yield chunk({"content": piece})
        if reply.cut_stream:
            return
        yield chunk({}, reply.finish_reason)
        options = body.get("stream_options") or {}
        if options.get("include_usage"):
            usage_event = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body["model"],
                "choices": [],
                "usage": self._usage(body, "".join(pieces)),
            }
            yield f"data: {json.dumps(usage_event)}\n\n"
        yield "data: [DONE]\n\n"
