"""What the turn's steps share: the turn in progress (:class:`Turn`), what a step may reply
(:data:`Reply`), the interface of a step (:class:`Step`) and an ordered list of them
(:class:`Steps`)."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, TypeVar, assert_never

from contracts.events import (
    Action,
    AnswerBody,
    EscalationReason,
    Incident,
    QueryReceived,
    SimilarCase,
)
from contracts.readers import Principals
from orchestrator.attachments import StoredAttachment
from orchestrator.compose import Article, compose_text
from orchestrator.config import OrchestratorSettings
from orchestrator.dialogue import readable
from orchestrator.escalation import EscalationCheckpoint
from orchestrator.intent import Intent
from orchestrator.memory import Conversation
from orchestrator.retrieval import Retrieval
from orchestrator.state import TurnState
from orchestrator.sufficiency import Verdict
from orchestrator.turn.deps import AuditDetail, AuditNote, Replies, TurnDeps

log = logging.getLogger("deskpilot.orchestrator")
T = TypeVar("T")

CRAWL_STARTED = "That isn't in the knowledge base yet, so I'm reading the IT help site for it."
"""What the user is told while the crawl runs."""


class Section(Enum):
    """Which part of the turn a step belongs to."""

    CONVERSATION = "conversation"
    """What the conversation asks of the service desk (tickets, automations, incidents): run
    once, when the message arrives."""
    QUESTION = "question"
    """Answering the question from the knowledge base: run again when a turn is decided anew
    (after its crawl, for an automation's article); what the message's attachments said opens
    the answers of these steps."""


class Reader(Enum):
    """Who read the message's intent; the end of every decision's reason says so when an LLM
    is configured (the value is that ending)."""

    CLASSIFIER = ""
    """The learned classifier, no LLM configured."""
    LLM = "; intent by the LLM"
    FALLBACK = "; intent by the classifier (no valid LLM reading)"
    """The classifier, because the LLM failed or gave no valid reading."""


# -- what a step replies -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Answer:
    """Send ``body`` now; the turn is answered."""

    body: AnswerBody
    reason: str
    resolved: Conversation | None = None
    """The conversation as its checklist resolved it: filed as a silent, resolved ticket."""
    ticket_offer: str | None = None
    """Why a "yes" to this answer files a ticket; without it only a ``no_answer`` offers one."""


@dataclass(frozen=True, kw_only=True)
class Escalate:
    """File a ticket; the turn waits for the ticketing service (or its deadline)."""

    cause: EscalationReason
    reason: str
    """The detail: for the log and the ticket."""
    sentiment: float | None = None


@dataclass(frozen=True, kw_only=True)
class Crawl:
    """Read the help sites first; the turn waits for the crawl (:mod:`orchestrator.crawl`)."""

    reason: str


@dataclass(frozen=True, kw_only=True)
class CheckTicket:
    """Ask the ticketing service how a ticket is doing; the turn waits for its answer."""

    key: str | None
    """The ticket the user named; ``None`` for their latest tickets."""

    @property
    def reason(self) -> str:
        return f"ticket status question ({self.key or 'latest tickets'})"


Reply = Answer | Escalate | Crawl | CheckTicket
"""A step's decision: what the turn does next, and why."""


def answer_of(reply: Reply) -> AnswerBody:
    """The reply as an answer body, for a turn that must answer now (decided again after its
    crawl) and for callers that look at the decision only."""
    match reply:
        case Answer():
            return reply.body
        case Crawl():
            return compose_text(CRAWL_STARTED, Action.CRAWL)
        case Escalate():
            return compose_text("", Action.ESCALATED)
        case CheckTicket():
            raise TypeError("a ticket status question is not an answer to the question")
        case _:
            assert_never(reply)


# -- the steps ----------------------------------------------------------------------------------


class StepOrderError(RuntimeError):
    """A step needs what an earlier step finds out, and that step did not run before it."""


class Step(ABC):
    """One step of the turn: a reply with its reason, or ``None`` to let the next step decide.

    A step may note what it found out on the :class:`Turn` for the steps after it (the intent,
    the retrieval); it reads what it needs from there and from ``turn.deps``, never from
    another step.
    """

    name: ClassVar[str]
    section: ClassVar[Section] = Section.QUESTION

    @abstractmethod
    async def __call__(self, turn: Turn) -> Reply | None: ...

    def __repr__(self) -> str:
        return f"<step {self.name}>"


class NoDecision(RuntimeError):
    """Every step let the turn pass; the last step of a turn must always reply."""


@dataclass(frozen=True)
class Steps:
    """The turn's steps, in the order they are asked."""

    all: tuple[Step, ...]

    def __post_init__(self) -> None:
        names = [step.name for step in self.all]
        if len(set(names)) != len(names):
            raise ValueError(f"step names must be unique: {names}")

    def __iter__(self) -> Iterator[Step]:
        return iter(self.all)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(step.name for step in self.all)

    @property
    def question(self) -> tuple[Step, ...]:
        """The steps that answer the question (what runs again when a turn is decided anew)."""
        return tuple(step for step in self.all if step.section is Section.QUESTION)

    def inserted(self, step: Step, *, before: str | None = None, after: str | None = None) -> Steps:
        """These steps with ``step`` added before or after the one named."""
        if (before is None) == (after is None):
            raise ValueError("name exactly one step to insert before or after")
        anchor = before if before is not None else after
        if anchor not in self.names:
            raise ValueError(f"no step named {anchor!r}; the steps are {list(self.names)}")
        at = self.names.index(anchor) + (0 if before is not None else 1)
        return Steps((*self.all[:at], step, *self.all[at:]))

    def without(self, name: str) -> Steps:
        """These steps without the one named."""
        if name not in self.names:
            raise ValueError(f"no step named {name!r}; the steps are {list(self.names)}")
        return Steps(tuple(step for step in self.all if step.name != name))


async def first_reply(turn: Turn, steps: Iterable[Step]) -> tuple[Step, Reply]:
    """Ask ``steps`` in order; the first reply decides the turn."""
    for step in steps:
        reply = await step(turn)
        if reply is not None:
            log.debug("step %s decided", step.name)
            return step, reply
    raise NoDecision(f"no step decided turn {turn.state.correlation_id}")


# -- the turn in progress -----------------------------------------------------------------------


class Background:
    """Work started in a worker thread now and awaited later, or dropped, by a turn."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def soon(self, work: Callable[..., T], /, *args: Any, **kwargs: Any) -> asyncio.Task[T]:
        task = asyncio.create_task(asyncio.to_thread(work, *args, **kwargs))
        # Held until done (the loop keeps only weak references); an error nobody awaited is
        # consumed here rather than reported as "never retrieved".
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return task


@dataclass(kw_only=True)
class Turn:
    """One turn in progress: what it works with, and what its steps found out so far."""

    deps: TurnDeps
    settings: OrchestratorSettings
    """The settings of this turn (the environment's, with the admins' runtime overrides)."""
    checkpoint: EscalationCheckpoint
    steps: Steps
    background: Background
    state: TurnState
    conversation: Conversation
    replies: Replies
    text: str
    """The question: the (redacted) message, with what its attachments say."""
    query: QueryReceived | None = None
    """The message as it arrived; ``None`` when the question is decided again."""
    attached: list[StoredAttachment] = field(default_factory=list)
    incident: Incident | None = None
    """The ongoing incident the message is about, if any."""
    allow_crawl: bool = True
    crawling: bool = False
    """The turn is decided again while its crawl still runs: pages not read yet may answer it,
    so a decline is not final (:func:`~orchestrator.turn.question.find_answer`)."""
    settled: bool = False
    """A crawl for this question read no new page lately (:mod:`orchestrator.sites`): no crawl
    follows, so a decline is final."""
    audit_notes: list[AuditNote] = field(default_factory=list)
    """Audit records the steps noted (:meth:`note`), published with the turn's outcome
    (:func:`~orchestrator.turn.finish.audit`); shared by a copy of the turn (``replace``)."""

    # What the question steps find out, for the steps after them.
    follow_up: bool = field(default=False, init=False)
    """The message follows up on the conversation's topic ("im on linux")."""
    asked: str = field(default="", init=False)
    """What is asked: the message, with the topic for a follow-up, as redacted (placeholders
    such as ``<EMAIL_ADDRESS_1>`` left in: the sufficiency check leaves them out)."""
    reader: Reader = field(default=Reader.CLASSIFIER, init=False)
    early_search: asyncio.Task[Retrieval] | None = field(default=None, init=False)
    similar_cases: asyncio.Task[list[SimilarCase]] | None = field(default=None, init=False)
    read_intent: Intent | None = field(default=None, init=False)
    retrieved: Retrieval | None = field(default=None, init=False)
    answering: Article | None = field(default=None, init=False)
    """The article that answers the question (similar enough and covering its key terms,
    :mod:`orchestrator.sufficiency`); ``None`` when none does."""
    verdict: Verdict | None = field(default=None, init=False)
    """What the sufficiency check said of the best similar article (``None`` without one)."""
    judged: float | None = field(default=None, init=False)
    """The critique's confidence in the model's answer (:mod:`orchestrator.llm.critique`);
    ``None`` when the answer was not critiqued. Below ``critique_min_confidence`` the turn is
    reported as answered with low confidence and a "yes" files a ticket."""

    def note(self, action: str, reason: str, **details: AuditDetail) -> None:
        """Record ``action`` in the audit trail with the turn's outcome, not now: one write
        for the turn's records instead of one per step, and none on the way to the answer."""
        self.audit_notes.append(AuditNote(action, reason, details))

    @property
    def intent(self) -> Intent:
        if self.read_intent is None:
            raise StepOrderError("the intent step must run before this one")
        return self.read_intent

    @property
    def retrieval(self) -> Retrieval:
        if self.retrieved is None:
            raise StepOrderError("the retrieval step must run before this one")
        return self.retrieved

    @property
    def by(self) -> str:
        """The end of a decision's reason that says who read the intent."""
        return self.reader.value

    @property
    def principals(self) -> Principals:
        """Who reads the answer: only what they may read is searched (:mod:`contracts.readers`)."""
        state = self.state
        return Principals.of(state.user_id, state.groups, authenticated=state.authenticated)

    @property
    def os(self) -> str | None:
        """The user's operating system, when they said it."""
        return self.conversation.facts.get("os")

    @property
    def search_text(self) -> str:
        """What is searched and classified: :attr:`asked` with the placeholders read as plain
        words (:func:`orchestrator.dialogue.readable`)."""
        return readable(self.asked)

    @property
    def off_topic(self) -> bool:
        """The intent is outside IT support (a follow-up is on its topic's)."""
        return not self.follow_up and not self.intent.in_scope

    @property
    def similar(self) -> bool:
        """The knowledge base's best match clears the relevance threshold."""
        best = self.retrieval.confidence
        return best is not None and best >= self.settings.relevance_threshold

    @property
    def covered(self) -> bool:
        """An article of the knowledge base answers the question: similar enough, and about
        what it asks (:attr:`answering`)."""
        if self.retrieved is None:
            raise StepOrderError("the retrieval step must run before this one")
        return self.answering is not None

    @property
    def not_covered(self) -> str:
        """Why the knowledge base does not answer, for reasons and the audit trail."""
        if not self.similar:
            return f"{self.confidence} below threshold {self.settings.relevance_threshold}"
        verdict = self.verdict.reason if self.verdict is not None else "no article answers"
        return f"{self.confidence}, but {verdict}"

    @property
    def confidence(self) -> str:
        """The best match, for reasons and the audit trail."""
        best = self.retrieval.confidence
        return f"best similarity {best:.3f}" if best is not None else "no hits"
