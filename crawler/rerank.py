"""An LLM's second opinion on the link plan: with ``LLM_BASE_URL`` set, the model re-orders the
best few candidates of a page for the question.

The planner's scores stay in charge of the frontier: the model only re-orders the top
``CRAWLER_LLM_RERANK_TOP`` candidates among themselves (they keep the same set of scores, handed
out in the model's order), so a link it likes is never promoted past one the planner ranked above
the whole group. Any failure (no answer in time, an error status, a reply that is not the JSON
asked for) leaves the plan as the planner made it. One call per page with a question; none
without. The endpoint is any OpenAI-compatible ``/chat/completions``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import Protocol

import httpx
from pydantic import BaseModel, ValidationError

from crawler.config import CrawlerSettings
from crawler.planner import PlannedLink
from crawler.urls import url_words

log = logging.getLogger("deskpilot.crawler.rerank")

INSTRUCTIONS = (
    "You help a web crawler answer an employee's IT-support question from the company's help "
    "site. Given the question and numbered links found on a page, order the links by how likely "
    "the page behind each one answers the question, best first. Reply with JSON only: "
    '{"order": [link numbers, best first]}.'
)


class Reranker(Protocol):
    async def rerank(self, question: str, planned: list[PlannedLink]) -> list[PlannedLink]: ...

    async def aclose(self) -> None: ...


class NoReranker:
    """No LLM configured: the planner's order stands."""

    async def rerank(self, question: str, planned: list[PlannedLink]) -> list[PlannedLink]:
        return planned

    async def aclose(self) -> None:
        return None


class _Order(BaseModel):
    order: list[int]


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message


class _Completion(BaseModel):
    choices: list[_Choice]


class LLMReranker:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        top: int = 8,
        timeout_s: float = 8.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self.model = model
        self.top = top
        self._client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s), transport=transport
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def rerank(self, question: str, planned: list[PlannedLink]) -> list[PlannedLink]:
        if not question.strip() or len(planned) < 2 or self.top < 2:
            return planned
        head, tail = planned[: self.top], planned[self.top :]
        try:
            order = await self._order(question, head)
        except (httpx.HTTPError, ValidationError, ValueError, IndexError) as exc:
            log.warning(
                "LLM re-ranking failed; keeping the planner's order",
                extra={"error": type(exc).__name__, "detail": str(exc)[:200]},
            )
            return planned
        scores = sorted((p.score for p in head), reverse=True)
        ranked = [
            dataclasses.replace(head[index], score=score, llm_rank=rank)
            for rank, (index, score) in enumerate(zip(order, scores, strict=True), start=1)
        ]
        return ranked + tail

    async def _order(self, question: str, head: Sequence[PlannedLink]) -> list[int]:
        """Indices into ``head``, best first: the model's valid picks, then the rest in order."""
        listing = "\n".join(f"{number}. {link_line(p)}" for number, p in enumerate(head, start=1))
        response = await self._client.post(
            self.url,
            json={
                "model": self.model,
                "temperature": 0,
                "response_format": {"type": "json_object"},
                "messages": [
                    {"role": "system", "content": INSTRUCTIONS},
                    {"role": "user", "content": f"Question: {question}\n\nLinks:\n{listing}"},
                ],
            },
        )
        response.raise_for_status()
        content = _Completion.model_validate_json(response.content).choices[0].message.content
        picks = _Order.model_validate(json.loads(content or "")).order
        order: list[int] = []
        for number in picks:
            if 1 <= number <= len(head) and number - 1 not in order:
                order.append(number - 1)
        if not order:
            raise ValueError("the reply named none of the links")
        return order + [i for i in range(len(head)) if i not in order]


def link_line(planned: PlannedLink) -> str:
    candidate = planned.candidate
    words = " ".join(url_words(candidate.url))
    context = f" (near: {candidate.context[:120]})" if candidate.context else ""
    return f"{candidate.anchor[:100] or '(no text)'} [{words}]{context}"


def build_reranker(settings: CrawlerSettings) -> Reranker:
    """:class:`LLMReranker` when ``LLM_BASE_URL`` is set (and re-ranking is not turned off).

    Raises ``ValueError`` for a base URL without a model, so a typo fails at start-up.
    """
    if not settings.llm_base_url or settings.llm_rerank_top < 2:
        return NoReranker()
    if not settings.llm_model:
        raise ValueError("LLM_BASE_URL is set but LLM_MODEL is not: name the model to use")
    if not settings.llm_base_url.startswith(("http://", "https://")):
        raise ValueError("LLM_BASE_URL must be an http:// or https:// URL")
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return LLMReranker(
        settings.llm_base_url,
        settings.llm_model,
        api_key=key,
        top=settings.llm_rerank_top,
        timeout_s=settings.llm_rerank_timeout_s,
    )
