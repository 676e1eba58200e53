"""The plugin interface: what one approved automation provides to the runner."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from orchestrator.automations.outcomes import ExecutionResult, UserContext


@dataclass(frozen=True)
class Trigger:
    """An automation the message asks for, and the kind of evidence (for logs and audit)."""

    action: str
    kind: str


@dataclass(frozen=True)
class ExecutionRequest:
    user_id: str
    request_id: str


class Automation(ABC):
    """One approved action: a trigger over redacted text, the user-facing texts, an executor.

    The runner enforces the preconditions every automation shares (allow-listed, authenticated
    user, an explicit yes in a later message, the offer still fresh) and audits each step; a
    plugin only says when it applies and how it runs.
    """

    name: ClassVar[str]

    @abstractmethod
    def detect(self, text: str) -> Trigger | None:
        """The trigger, over the user's redacted message."""

    @abstractmethod
    def offer_question(self) -> str: ...

    @abstractmethod
    def self_service(self) -> tuple[str, str]:
        """The article URL and the text for users who must do it themselves."""

    @abstractmethod
    def declined_text(self) -> str: ...

    @abstractmethod
    async def execute(self, request: ExecutionRequest, user: UserContext) -> ExecutionResult:
        """Run it once for this request id; safe to call again with the same id."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections."""
