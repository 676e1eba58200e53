"""The checkpoint: the decision for one message, an explicit request for a person or the anger
score over the threshold, with the reasons to log and to put in the ticket."""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.events import EscalationReason
from orchestrator.escalation.human_request import HumanRequest, detect_human_request
from orchestrator.sentiment import EMPTY_TRAJECTORY, AngerScore, AngerScorer, Trajectory

DEFAULT_ANGER_THRESHOLD = 0.5


@dataclass(frozen=True)
class EscalationPolicy:
    """The checkpoint's settings (see the report for the proposed ``ORCHESTRATOR_*`` fields)."""

    anger_threshold: float = DEFAULT_ANGER_THRESHOLD
    """An anger score at or above this escalates. 0.6 needs two strong clues or three mild
    ones; see ``deskpilot eval escalation`` for its false-escalation rate."""


@dataclass(frozen=True)
class EscalationDecision:
    """Whether this message escalates, and the reasons to log and to put in the ticket."""

    escalate: bool
    reason: EscalationReason | None
    """``user_request`` or ``anger`` when escalating (a request wins), else None."""
    anger: AngerScore
    request: HumanRequest | None = None
    reasons: list[str] = field(default_factory=list)
    """Short phrases: the request's, then the anger score's evidence."""

    @property
    def reason_detail(self) -> str:
        """One line for ``EscalationRequested.reason_detail`` and the log."""
        return "; ".join(self.reasons)


class EscalationCheckpoint:
    """Decides, message by message, whether the conversation goes to a technician."""

    def __init__(
        self, scorer: AngerScorer | None = None, policy: EscalationPolicy | None = None
    ) -> None:
        self.scorer = scorer or AngerScorer()
        self.policy = policy or EscalationPolicy()

    def check(self, text: str, trajectory: Trajectory = EMPTY_TRAJECTORY) -> EscalationDecision:
        request = detect_human_request(text)
        anger = self.scorer.score(text, trajectory)
        angry = anger.score >= self.policy.anger_threshold
        reasons: list[str] = []
        if request:
            reasons.append(request.reason)
        if angry:
            reasons.append(f"anger {anger.score:.2f} >= {self.policy.anger_threshold:.2f}")
            reasons.extend(anger.reasons)
        if request:
            reason: EscalationReason | None = EscalationReason.USER_REQUEST
        elif angry:
            reason = EscalationReason.ANGER
        else:
            reason = None
        return EscalationDecision(
            escalate=reason is not None,
            reason=reason,
            anger=anger,
            request=request,
            reasons=reasons,
        )
