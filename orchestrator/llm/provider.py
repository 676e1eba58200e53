"""The provider plugin: a chat model behind one small interface, or none (:class:`NoLLM`).

:func:`build_provider` picks it from configuration; :class:`OpenAICompatible` speaks the OpenAI
Chat Completions protocol with retries, backoff and a deadline. Errors are :class:`LLMError`.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, ClassVar, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from orchestrator.config import OrchestratorSettings

log = logging.getLogger("deskpilot.orchestrator.llm")

NO_LLM_MESSAGE = "no LLM is configured (set LLM_BASE_URL and LLM_MODEL to use one)"
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
"""Rate limits and server errors; any other 4xx is the request's fault and fails at once."""


class ChatMessage(BaseModel):
    """One message of a chat-completions conversation."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class LLMError(Exception):
    """A model call failed; the caller takes its deterministic path.

    ``message`` is the endpoint's own ``error.message`` when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(f"{detail}: {message}" if detail else message)
        self.message = message
        self.status = status
        self.code = code


class LLMUnavailable(LLMError):
    """No model is configured: :class:`NoLLM` was asked to generate."""


class LLMTimeout(LLMError):
    """No (complete) response within the configured timeouts or deadline."""


class LLMProvider(ABC):
    """A chat model. Implementations are safe to share between concurrent turns."""

    name: ClassVar[str]
    enabled: ClassVar[bool] = True

    @abstractmethod
    async def chat(self, messages: Sequence[ChatMessage], *, json_mode: bool = False) -> str:
        """The model's whole reply; with ``json_mode`` the model is held to one JSON object.

        Raises :class:`LLMError` (or a subclass) on any failure.
        """

    @abstractmethod
    def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        """The reply as text deltas, in order (an async generator: close it when done early).

        Raises :class:`LLMError` on failure, possibly after some deltas were produced.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook; most providers hold nothing
        """Release connections; the provider is unusable afterwards."""


class NoLLM(LLMProvider):
    """The default: no model. Callers check ``enabled`` and stay on the deterministic path."""

    name = "none"
    enabled = False

    async def chat(self, messages: Sequence[ChatMessage], *, json_mode: bool = False) -> str:
        raise LLMUnavailable(NO_LLM_MESSAGE)

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        raise LLMUnavailable(NO_LLM_MESSAGE)
        yield ""  # unreachable; makes this an async generator like every other provider's


class OpenAICompatibleConfig(BaseModel):
    """Configuration of :class:`OpenAICompatible`; :func:`build_provider` fills it from settings."""

    model_config = ConfigDict(frozen=True)

    base_url: str = Field(description="Up to and including `/v1`; `/chat/completions` is added.")
    model: str = Field(min_length=1)
    api_key: SecretStr | None = None
    temperature: float = Field(0.0, ge=0, le=2)
    connect_timeout_s: float = Field(5.0, gt=0)
    read_timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(2, ge=0)
    backoff_base_s: float = Field(0.5, ge=0, description="First retry waits about this long.")
    backoff_max_s: float = Field(8.0, ge=0)
    retry_after_max_s: float = Field(10.0, ge=0)
    deadline_s: float | None = Field(20.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("LLM_BASE_URL must be an http:// or https:// URL")
        return value.rstrip("/")


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class _Completion(BaseModel):
    choices: list[_Choice]


class _Delta(BaseModel):
    content: str | None = None


class _ChunkChoice(BaseModel):
    index: int = 0
    delta: _Delta = Field(default_factory=_Delta)
    finish_reason: str | None = None


class _Chunk(BaseModel):
    choices: list[_ChunkChoice] = Field(default_factory=list)
    error: Any = None


class OpenAICompatible(LLMProvider):
    """Chat Completions over HTTP (``POST {base_url}/chat/completions``), with retries.

    Connection errors, timeouts, 429 and 5xx are retried up to ``max_retries`` times with
    exponential backoff and jitter; a 429's ``Retry-After`` is honoured, and one longer than
    ``retry_after_max_s`` fails the call at once rather than stall a user's turn. Other 4xx fail at
    once with the endpoint's ``error.message``. ``deadline_s`` bounds a whole call, retries
    included (for a stream: until the response starts).
    """

    name = "openai-compatible"

    def __init__(
        self,
        config: OpenAICompatibleConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        headers = {"Accept": "application/json"}
        if config.api_key is not None and config.api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {config.api_key.get_secret_value()}"
        self._url = f"{config.base_url}/chat/completions"
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(config.read_timeout_s, connect=config.connect_timeout_s),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def chat(self, messages: Sequence[ChatMessage], *, json_mode: bool = False) -> str:
        payload = self._payload(messages, json_mode=json_mode, stream=False)
        response = await self._start(payload, stream=False)
        return self._content(response)

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        payload = self._payload(messages, json_mode=False, stream=True)
        response = await self._start(payload, stream=True)
        try:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                # A server that ignored "stream": true answered with one whole completion.
                await response.aread()
                yield self._content(response)
                return
            finished = False
            async for data in _sse_data(response):
                if data.strip() == "[DONE]":
                    break
                for delta, done in self._chunk(data):
                    finished = finished or done
                    if delta:
                        yield delta
            else:
                if not finished:
                    raise LLMError("the stream ended before [DONE]")
        except httpx.TimeoutException as exc:
            raise LLMTimeout(f"the stream stalled ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise LLMError(f"the stream broke off ({type(exc).__name__})") from exc
        finally:
            await response.aclose()

    def _payload(
        self, messages: Sequence[ChatMessage], *, json_mode: bool, stream: bool
    ) -> dict[str, Any]:
        if not messages:
            raise ValueError("a chat needs at least one message")
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": [message.model_dump() for message in messages],
            "temperature": self.config.temperature,
            "stream": stream,
        }
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    async def _start(self, payload: dict[str, Any], *, stream: bool) -> httpx.Response:
        """A successful response (body unread when streaming), within the deadline."""
        try:
            async with asyncio.timeout(self.config.deadline_s):
                return await self._send_with_retries(payload, stream=stream)
        except TimeoutError as exc:
            raise LLMTimeout(
                f"no response within the {self.config.deadline_s:g} s deadline"
            ) from exc

    async def _send_with_retries(self, payload: dict[str, Any], *, stream: bool) -> httpx.Response:
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                request = self._client.build_request("POST", self._url, json=payload)
                response = await self._client.send(request, stream=stream)
            except httpx.TimeoutException as exc:
                error: LLMError = LLMTimeout(f"timed out ({type(exc).__name__})")
                error.__cause__ = exc
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                error = LLMError(f"cannot reach the LLM endpoint ({type(exc).__name__})")
                error.__cause__ = exc
            except httpx.HTTPError as exc:
                raise LLMError(f"the request failed ({type(exc).__name__})") from exc
            else:
                if response.is_success:
                    return response
                try:
                    await response.aread()
                finally:
                    await response.aclose()
                error = self._error(response)
                if response.status_code not in RETRYABLE_STATUS:
                    raise error
                retry_after = retry_after_s(response.headers)

            if attempt >= self.config.max_retries:
                raise error
            if retry_after is not None and retry_after > self.config.retry_after_max_s:
                raise LLMError(
                    f"{error}; Retry-After {retry_after:g} s is longer than the "
                    f"{self.config.retry_after_max_s:g} s worth waiting",
                    status=error.status,
                    code=error.code,
                )
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            attempt += 1
            log.warning(
                "LLM call failed; retrying",
                extra={
                    "reason": str(error),
                    "status": error.status,
                    "attempt": attempt,
                    "retry_in_s": round(delay, 3),
                },
            )
            await asyncio.sleep(delay)

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter in [delay/2, delay], so replicas do not stampede."""
        delay = min(self.config.backoff_max_s, self.config.backoff_base_s * 2.0**attempt)
        return delay * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not cryptography  # nosec B311

    def _error(self, response: httpx.Response) -> LLMError:
        """The documented error shape ``{"error": {"message", "type", "param", "code"}}``.

        Also accepts ``{"error": "..."}`` (Ollama) and ``{"message": "..."}``.
        """
        message: Any = None
        code: Any = None
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict):
                message, code = error.get("message"), error.get("code")
            elif isinstance(error, str):
                message = error
            else:
                message = body.get("message")
        if not isinstance(message, str) or not message.strip():
            message = response.reason_phrase or "no error message"
        return LLMError(
            self._scrub(message)[:500],
            status=response.status_code,
            code=str(code) if code is not None else None,
            detail=f"the LLM endpoint answered {response.status_code}",
        )

    def _scrub(self, text: str) -> str:
        """Some servers quote the key they rejected; it must not travel on in an error."""
        key = self.config.api_key.get_secret_value() if self.config.api_key else ""
        return text.replace(key, "***") if len(key) >= 4 else text

    @staticmethod
    def _content(response: httpx.Response) -> str:
        try:
            completion = _Completion.model_validate_json(response.content)
        except ValidationError:
            # from None: the validation error quotes the completion, which must not be logged
            raise LLMError("the response is not a chat completion") from None
        if not completion.choices:
            raise LLMError("the completion has no choices")
        choice = completion.choices[0]
        if not choice.message.content or not choice.message.content.strip():
            raise LLMError(f"the completion is empty (finish_reason={choice.finish_reason})")
        if choice.finish_reason == "length":
            log.warning("LLM completion was cut off at the token limit")
        return choice.message.content

    @staticmethod
    def _chunk(data: str) -> list[tuple[str | None, bool]]:
        """(text delta, finished) of one ``chat.completion.chunk`` event, first choice only."""
        try:
            chunk = _Chunk.model_validate_json(data)
        except ValidationError:
            raise LLMError("a stream event is not a chat.completion.chunk") from None
        if chunk.error is not None:
            message = chunk.error.get("message") if isinstance(chunk.error, dict) else None
            raise LLMError(str(message or chunk.error)[:500], detail="the stream reported an error")
        return [
            (choice.delta.content, choice.finish_reason is not None)
            for choice in chunk.choices
            if choice.index == 0
        ]


async def _sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event (multi-line data joined with newlines)."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def retry_after_s(headers: httpx.Headers) -> float | None:
    """Seconds a 429/503 asks to wait: ``retry-after-ms``, or ``Retry-After`` (seconds or date)."""
    if milliseconds := headers.get("retry-after-ms"):
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def build_provider(
    settings: OrchestratorSettings, *, transport: httpx.AsyncBaseTransport | None = None
) -> LLMProvider:
    """The provider the configuration asks for: :class:`NoLLM` unless ``LLM_BASE_URL`` is set.

    Raises ``ValueError`` for a half configuration (a base URL without a model), so a typo fails
    at start-up instead of silently turning the LLM off.
    """
    if not settings.llm_base_url:
        return NoLLM()
    if not settings.llm_model:
        raise ValueError("LLM_BASE_URL is set but LLM_MODEL is not: name the model to use")
    config = OpenAICompatibleConfig(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key,
        temperature=settings.llm_temperature,
        connect_timeout_s=settings.llm_connect_timeout_s,
        read_timeout_s=settings.llm_read_timeout_s,
        max_retries=settings.llm_max_retries,
        retry_after_max_s=settings.llm_retry_after_max_s,
        deadline_s=settings.llm_deadline_s,
    )
    return OpenAICompatible(config, transport=transport)


def describe_unexpected(exc: Exception) -> str:
    """Type and place of an unexpected error; its message may quote the model's output."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    where = f" at {frame.tb_frame.f_code.co_filename}:{frame.tb_lineno}" if frame else ""
    return f"unexpected {type(exc).__name__}{where}"
