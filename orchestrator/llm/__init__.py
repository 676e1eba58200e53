"""The LLM provider plugin: an optional language model that words answers and makes decisions.

Deskpilot works without a model. :func:`build_provider` picks the plugin from configuration:
:class:`NoLLM` when ``LLM_BASE_URL`` is unset (the default), otherwise :class:`OpenAICompatible`,
which speaks the OpenAI Chat Completions protocol that OpenAI, Ollama, vLLM and llama.cpp all
serve. Everything built on a model has a deterministic way out, and callers can rely on it:

- :func:`generate_answer` rewrites an extractive answer from the retrieved passages only, keeps
  just the citations that point into them, and returns the extractive answer unchanged whenever
  the model fails, times out or cites nothing it was given. While the model writes, the text so
  far can be shown to the user (``on_text``).
- :func:`critiqued_answer` drafts such an answer, then has the model judge each sentence or
  step of it against the same passages: what they do not support is removed, and the judge's
  confidence becomes the answer's; a failed critique sends the extractive answer.
- :func:`decide_json` returns a validated pydantic model, or ``None`` so the caller takes its
  deterministic path.
- :func:`read_message` is one such decision: the model's reading of a user's message (scope,
  kind, category, asks for a person) as a :class:`MessageReading`, or ``None`` so the caller
  takes the learned intent classifier's.

Prompts, completions and API keys never reach the logs: only status codes, attempt counts and
short reasons do.

The parts: :mod:`~orchestrator.llm.provider` (the plugin and its HTTP client),
:mod:`~orchestrator.llm.answers` (grounded answers), :mod:`~orchestrator.llm.critique` and
:mod:`~orchestrator.llm.sentences` (draft, then critique) and :mod:`~orchestrator.llm.decisions`
(structured decisions, reading a message).
"""

from __future__ import annotations

from orchestrator.llm.answers import (
    ANSWER_SYSTEM_PROMPT,
    MAX_PASSAGES,
    NOT_COVERED,
    PREVIEW_INTERVAL_S,
    TextSink,
    generate_answer,
    ground_citations,
    grounded_messages,
    preview_text,
)
from orchestrator.llm.critique import (
    CRITIQUE_SYSTEM_PROMPT,
    Critique,
    Critiqued,
    CritiqueMode,
    critique_applies,
    critiqued_answer,
)
from orchestrator.llm.decisions import (
    CATEGORY_HINTS,
    JSON_INSTRUCTION,
    READ_SYSTEM_PROMPT,
    MessageReading,
    decide_json,
    read_message,
    reading_messages,
)
from orchestrator.llm.provider import (
    NO_LLM_MESSAGE,
    RETRYABLE_STATUS,
    ChatMessage,
    LLMError,
    LLMProvider,
    LLMTimeout,
    LLMUnavailable,
    NoLLM,
    OpenAICompatible,
    OpenAICompatibleConfig,
    build_provider,
    retry_after_s,
)

__all__ = [
    "ANSWER_SYSTEM_PROMPT",
    "CATEGORY_HINTS",
    "CRITIQUE_SYSTEM_PROMPT",
    "JSON_INSTRUCTION",
    "MAX_PASSAGES",
    "NOT_COVERED",
    "NO_LLM_MESSAGE",
    "PREVIEW_INTERVAL_S",
    "READ_SYSTEM_PROMPT",
    "RETRYABLE_STATUS",
    "ChatMessage",
    "Critique",
    "CritiqueMode",
    "Critiqued",
    "LLMError",
    "LLMProvider",
    "LLMTimeout",
    "LLMUnavailable",
    "MessageReading",
    "NoLLM",
    "OpenAICompatible",
    "OpenAICompatibleConfig",
    "TextSink",
    "build_provider",
    "critique_applies",
    "critiqued_answer",
    "decide_json",
    "generate_answer",
    "ground_citations",
    "grounded_messages",
    "preview_text",
    "read_message",
    "reading_messages",
    "retry_after_s",
]
