"""Turn raw user text into text that is safe to store, index, trace and send to an LLM.

:class:`Redactor` wraps a Presidio analyzer (spaCy NER plus pattern recognizers, see
:mod:`redactor.recognizers`) and replaces every detected value with a numbered placeholder such as
``<PERSON_1>``. The numbering is Deskpilot's own rather than presidio-anonymizer's ``replace``
operator, which can only substitute one fixed string per entity type: the orchestrator needs to
tell "<EMAIL_ADDRESS_1> wrote to <EMAIL_ADDRESS_2>" apart, and to see that two mentions are the
same value.

Nothing in this module talks to the message bus, and nothing it returns contains an original
value, so a :class:`Redaction` can be logged, traced and published as it is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import spacy
from presidio_analyzer import AnalyzerEngine, RecognizerRegistry, RecognizerResult
from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer
from presidio_analyzer.nlp_engine import SpacyNlpEngine
from pydantic import BaseModel, ConfigDict, Field
from spacy.language import Language

from redactor.attributes import index_attribute_ruler
from redactor.config import RedactorSettings
from redactor.matmul import use_numpy_matmul, with_matmul_ops
from redactor.names import NameLists, fold, name_lists, ordinary_words
from redactor.recognizers import ALWAYS_REDACTED, NER_ENTITIES, SECRET_ENTITIES, build_recognizers


class RedactedEntity(BaseModel):
    """One replaced span: its kind and its placeholder, deliberately without the original value."""

    model_config = ConfigDict(frozen=True)

    entity_type: str = Field(
        description="Presidio entity type of the replaced value.",
        examples=["EMAIL_ADDRESS", "PERSON", "PASSWORD"],
    )
    placeholder: str = Field(
        description="The placeholder that now stands in the text where the value was.",
        examples=["<EMAIL_ADDRESS_1>"],
    )


class Redaction(BaseModel):
    """The outcome of redacting one text; safe to log and publish."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(description="The input with every detected value replaced by a placeholder.")
    entities: list[RedactedEntity] = Field(
        default_factory=list,
        description=(
            "One entry per replaced span, in text order. A value mentioned twice appears twice, "
            "with the same placeholder."
        ),
    )

    flagged: dict[str, int] = Field(
        default_factory=dict,
        description="Values of types the policy flags: counted per type, left in the text.",
    )

    def summary(self) -> dict[str, int]:
        """How many spans of each entity type were replaced, e.g. ``{"EMAIL_ADDRESS": 2}``."""
        return dict(Counter(entity.entity_type for entity in self.entities))


class Detected(BaseModel):
    """Where a value to redact sits in a text, and what kind it is; never the value."""

    model_config = ConfigDict(frozen=True)

    entity_type: str = Field(examples=["EMAIL_ADDRESS"])
    start: int = Field(ge=0, description="Offset of the first character in the input.")
    end: int = Field(ge=0, description="Offset just past the last character.")
    score: float = Field(description="The detector's confidence, 0 to 1.")


@dataclass(frozen=True)
class Found:
    """A span to replace and the normalised form of its value (see :func:`_identity`)."""

    result: RecognizerResult
    identity: str = field(repr=False)
    flag_only: bool = False
    """The policy flags this type: counted and logged, left in the text."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.result.entity_type, self.identity)


class SpacyModelNotInstalledError(RuntimeError):
    """The configured spaCy model is not installed; the redactor refuses to download it."""


def build_analyzer(settings: RedactorSettings) -> AnalyzerEngine:
    """Build the Presidio analyzer: loads the spaCy model, so call it once per process.

    The registry is explicit (see :func:`redactor.recognizers.build_recognizers`) instead of
    Presidio's default, which would load dozens of country-specific recognizers and an e-mail
    recognizer that downloads the public-suffix list. The person and address recognizers never
    start a name or a street at a word of ``settings.allow_list`` (as it is now: a redactor
    given another allow-list and this analyzer applies its own list to what they report).
    """
    _require_installed_model(settings.spacy_model)
    nlp_engine = SpacyNlpEngine(
        models=[{"lang_code": settings.language, "model_name": settings.spacy_model}]
    )
    nlp_engine.load()
    keep_every_ner_label(nlp_engine, settings.language)
    without_parser(nlp_engine.get_nlp(settings.language))
    use_numpy_matmul(nlp_engine.get_nlp(settings.language))
    index_attribute_ruler(nlp_engine.get_nlp(settings.language))
    names = name_lists(nlp_engine.get_nlp(settings.language))
    registry = RecognizerRegistry(
        recognizers=build_recognizers(
            settings.language,
            settings.employee_id_patterns,
            settings.hostname_patterns,
            names=names,
            allowed_words=allowed_words(settings.allow_list),
            secret_plugins=settings.secret_plugins,
            public_domains=settings.public_domains,
        ),
        supported_languages=[settings.language],
    )
    return AnalyzerEngine(
        registry=registry,
        nlp_engine=nlp_engine,
        supported_languages=[settings.language],
        # A context word may also follow the value ("416 60 039 office"), not only precede it.
        context_aware_enhancer=LemmaContextAwareEnhancer(
            context_prefix_count=5, context_suffix_count=2
        ),
    )


def keep_every_ner_label(nlp_engine: SpacyNlpEngine, language: str) -> None:
    """Keep the labels of the model's entities that Presidio has no name for (``CARDINAL``,
    ``MONEY``, ``PRODUCT``...) under their own names, as Presidio does for an unmapped label,
    without its warning: it logged one per number of every message (272 lines for one uploaded
    log). Which entities are redacted does not change; recognizers read the labels they know."""
    nlp = nlp_engine.get_nlp(language)
    config = nlp_engine.ner_model_configuration
    mapping = dict(config.model_to_presidio_entity_mapping or {})
    for pipe in ("ner", "entity_ruler"):
        if nlp.has_pipe(pipe):
            for label in getattr(nlp.get_pipe(pipe), "labels", ()):
                mapping.setdefault(label, label)
    config.model_to_presidio_entity_mapping = mapping


def without_parser(nlp: Language) -> None:
    """Run ``nlp`` with its sentence recogniser instead of its dependency parser, when it has one.

    Nothing but :mod:`redactor.people` reads the parse (sentence starts, and whether a proper
    noun modifies a common noun, which it then reads from the tags), and the parser costs a
    sixth of the pipeline's time. The English models ship a small ``senter``, disabled, that
    marks the sentence starts on its own.
    """
    if "parser" in nlp.pipe_names and "senter" in nlp.component_names:
        nlp.remove_pipe("parser")
        nlp.enable_pipe("senter")


def allowed_words(terms: Iterable[str]) -> list[str]:
    """The single words of allow-listed terms ("Cisco AnyConnect" gives "Cisco" and
    "AnyConnect"), which the person and address recognizers never treat as a name."""
    return sorted({word for term in terms for word in re.findall(r"[^\W_]+", term)})


def _require_installed_model(model: str) -> None:
    """Fail fast on a missing model: Presidio would otherwise call ``spacy download`` itself."""
    if spacy.util.is_package(model) or Path(model).is_dir():
        return
    raise SpacyModelNotInstalledError(
        f"spaCy model {model!r} is not an installed package or a model directory. Install it "
        f"with the redactor's dependencies (pip install 'deskpilot[redactor]'); it is never "
        f"downloaded at run time."
    )


class AllowList:
    """Decides whether a detected span is only product or tool names and must be kept.

    Presidio's own allow-list compares the whole span case-sensitively, so it misses "outlook",
    "Outlook and Teams" or "the VPN" when NER tags them as one entity. Here a span is allowed when
    nothing but allow-listed terms (whole words, any case) and a few filler words remain in it. A
    span that also contains anything else, such as "John from Teams", is still redacted whole.
    """

    # Words that NER glues onto product names without making the span personal data.
    FILLER_WORDS: frozenset[str] = frozenset(
        {"a", "an", "the", "and", "or", "s", "my", "our", "app", "client"}
    )

    def __init__(self, terms: Iterable[str]) -> None:
        # Longest first, so "Cisco AnyConnect" wins over "AnyConnect"; any run of whitespace
        # between the words of a term matches.
        alternatives = [
            re.escape(term).replace(r"\ ", r"\s+")
            for term in sorted(
                {term.strip() for term in terms if term.strip()}, key=len, reverse=True
            )
        ]
        self._pattern = (
            re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)
            if alternatives
            else None
        )

    @classmethod
    def words_cover(cls, words: frozenset[str], span: str, ordinary: Callable[[str], bool]) -> bool:
        """True when ``span`` is some of ``words`` (single words, folded as
        :func:`redactor.names.fold` does) with filler or ordinary words around them and nothing
        else: the help sites' words (:mod:`redactor.site_terms`) keep "Dispatch" and "the
        Opsgenie app" but not "Jane from Dispatch"."""
        named = False
        for token in re.findall(r"\w+", span):
            if fold(token) in words:
                named = True
            elif token.casefold() not in cls.FILLER_WORDS and not ordinary(token):
                return False
        return named

    def covers(self, span: str, ordinary: Callable[[str], bool] | None = None) -> bool:
        """True if ``span`` consists only of allow-listed terms and filler words, or, with
        ``ordinary``, of allow-listed terms and words it accepts ("My Dell Latitude")."""
        if self._pattern is None or not self._pattern.search(span):
            return False
        remainder = self._pattern.sub(" ", span)
        return all(
            word.casefold() in self.FILLER_WORDS or (ordinary is not None and ordinary(word))
            for word in re.findall(r"\w+", remainder)
        )


class Redactor:
    """Redacts personal data and secrets from text. Build one per process and reuse it.

    Construction loads the spaCy model and builds every recognizer; :meth:`redact` is then
    CPU-bound, synchronous and keeps no state between calls, so one instance can serve every
    message (run it in a worker thread from async code). Construction and use never open a
    network connection and never write to disk.
    """

    def __init__(
        self, settings: RedactorSettings, *, analyzer: AnalyzerEngine | None = None
    ) -> None:
        """Load the analyzer, or reuse ``analyzer`` built by :func:`build_analyzer`.

        Passing an analyzer lets several redactors with different allow-lists or thresholds share
        one loaded spaCy model; ``settings.spacy_model`` and ``settings.language`` must then be the
        ones it was built with.
        """
        self._analyzer = analyzer if analyzer is not None else build_analyzer(settings)
        self._language = settings.language
        self._score_threshold = settings.score_threshold
        self._entities = sorted(self._analyzer.get_supported_entities(settings.language))
        self._allow_list = AllowList(settings.allow_list)
        # A product name with English words around it is no person or place ("the Dell
        # Latitude"); the model's vocabulary says which words are English.
        nlp_engine = self._analyzer.nlp_engine
        nlp = (
            nlp_engine.get_nlp(self._language)
            if isinstance(nlp_engine, SpacyNlpEngine)
            else spacy.blank(self._language)
        )
        self._is_english = NameLists(frozenset(), frozenset(), ordinary_words(nlp)).is_ordinary_word
        self._policy = dict(settings.policy)

    @property
    def entity_types(self) -> list[str]:
        """The entity types this redactor looks for, e.g. for a readiness report."""
        return list(self._entities)

    def redact(self, text: str) -> Redaction:
        """Replace every detected value in ``text`` with a placeholder.

        Callers can rely on: the same value gets the same placeholder within one call (ignoring
        case and spacing, and separators in card, IBAN and phone numbers; secrets are compared
        exactly); different values of a type are numbered 1, 2, ... in order of first appearance;
        text with nothing to redact comes back unchanged; the result never contains an original
        value. Types the policy flags are counted in ``flagged`` and left in the text.
        """
        return self.replace(text, self.find(text))

    def find(self, text: str, site_words: frozenset[str] = frozenset()) -> list[Found]:
        """What the policy does not keep, with what to do with it and the normalised form that
        decides which values are the same (for numbering across messages; it holds the value,
        so it never leaves the redactor's process). A person or place made only of
        ``site_words`` (the help sites' words, :mod:`redactor.site_terms`) is kept."""
        if not text.strip():
            return []
        found = []
        for result in self._spans(text, site_words):
            action = self._policy.get(result.entity_type, "redact")
            if action != "keep":
                identity = _identity(result.entity_type, text[result.start : result.end])
                found.append(Found(result, identity, flag_only=action == "flag"))
        return found

    @staticmethod
    def replace(
        text: str, found: Sequence[Found], numbers: Mapping[tuple[str, str], int] | None = None
    ) -> Redaction:
        """``text`` with the ``found`` spans replaced (flagged ones counted, not replaced),
        numbered by ``numbers`` (by entity type and identity, e.g. from
        :class:`~redactor.placeholders.ConversationPlaceholders`) or else per call."""
        redacted = _substitute(
            text,
            [f.result for f in found if not f.flag_only],
            None if numbers is None else lambda kind, identity: numbers[(kind, identity)],
        )
        flagged = Counter(f.result.entity_type for f in found if f.flag_only)
        return redacted.model_copy(update={"flagged": dict(flagged)}) if flagged else redacted

    def detect(self, text: str) -> list[Detected]:
        """The spans :meth:`redact` would replace, in text order, with offsets into ``text``
        (for evaluation and the ``deskpilot redact`` command; the values are not included)."""
        return [
            Detected(
                entity_type=f.result.entity_type,
                start=f.result.start,
                end=f.result.end,
                score=round(f.result.score, 3),
            )
            for f in self.find(text)
            if not f.flag_only
        ]

    def _spans(self, text: str, site_words: frozenset[str]) -> list[RecognizerResult]:
        with_matmul_ops()
        results = self._analyzer.analyze(
            text=text,
            language=self._language,
            entities=self._entities,
            score_threshold=self._score_threshold,
        )
        kept = [
            result
            for result in results
            if result.entity_type in ALWAYS_REDACTED
            or not self._allowed(text[result.start : result.end], result.entity_type, site_words)
        ]
        return _merge_overlaps([_whole_token(text, r) for r in kept])

    def _allowed(self, span: str, entity_type: str, site_words: frozenset[str]) -> bool:
        if entity_type not in NER_ENTITIES:
            return self._allow_list.covers(span)
        return self._allow_list.covers(span, self._is_english) or (
            bool(site_words) and AllowList.words_cover(site_words, span, self._is_english)
        )


# Pattern matches that may stop inside a word: "pc-12.corp.no" of "pc-12.corp.northwind.example".
_TOKEN_ENTITIES: frozenset[str] = frozenset({"URL", "EMAIL_ADDRESS", "IP_ADDRESS", "IBAN_CODE"})
_TOKEN_EDGE = " \t\r\n\"'()<>[]{}|"  # noqa: S105 - characters, not a credential  # nosec B105
_TRAILING_PUNCTUATION = ".,;:!?"
_CLOSING = {")": "(", "]": "[", "}": "{"}


def _whole_token(text: str, result: RecognizerResult) -> RecognizerResult:
    """Widen a pattern match to the whole whitespace-delimited token it sits in.

    A regex can match a prefix of a longer value (a URL ending at a two-letter top-level domain
    that is really the start of the next label); replacing only that prefix would leave the rest
    of the value in clear text. Sentence punctuation after the token stays outside.
    """
    if result.entity_type not in _TOKEN_ENTITIES:
        return result
    start, end = result.start, result.end
    while end - start > 1 and text[start] in "\"'":
        start += 1  # Presidio's quoted-URL pattern takes the quotes: the value is inside them
    while end - start > 1 and text[end - 1] in "\"'":
        end -= 1
    result = RecognizerResult(result.entity_type, start, end, result.score)
    # A list of addresses ("localhost,10.0.0.5,.corp.example") is not one token.
    edge = _TOKEN_EDGE + (",;" if result.entity_type == "IP_ADDRESS" else "")
    while start > 0 and text[start - 1] not in edge:
        start -= 1
    while end < len(text) and text[end] not in edge:
        end += 1
    while end > start:
        last = text[end - 1]
        if end > result.end and last in _TRAILING_PUNCTUATION:
            end -= 1
        elif last in _CLOSING and text[start:end].count(_CLOSING[last]) < text[start:end].count(
            last
        ):
            end -= 1  # "(see https://x.example/a)": the bracket is the sentence's
        else:
            break
    return RecognizerResult(result.entity_type, start, end, result.score)


def _merge_overlaps(results: Sequence[RecognizerResult]) -> list[RecognizerResult]:
    """One span per group of overlapping detections, returned in text order.

    Recognizers disagree: an e-mail's domain is also a URL, NER may read part of a password as a
    name, a pasted URL may carry a password. Replacing overlapping spans separately would corrupt
    the text, and keeping only one of two partly overlapping spans would leave the other's
    uncovered part, possibly a piece of a secret, in clear text. So each group of overlapping
    detections becomes their union, labelled by its best member: a secret first, then the higher
    score, then the longer span. When one span contains the others (the usual case) the union is
    simply that span.
    """
    merged: list[RecognizerResult] = []
    group: list[RecognizerResult] = []
    group_end = -1
    for result in sorted(results, key=lambda r: (r.start, -r.end)):
        if group and result.start < group_end:
            group.append(result)
            group_end = max(group_end, result.end)
            continue
        if group:
            merged.append(_union(group))
        group, group_end = [result], result.end
    if group:
        merged.append(_union(group))
    return merged


def _union(group: Sequence[RecognizerResult]) -> RecognizerResult:
    """The span covering every result in ``group``, typed and scored like its best member."""
    best = min(
        group,
        key=lambda r: (r.entity_type not in ALWAYS_REDACTED, -r.score, r.start - r.end),
    )
    return RecognizerResult(
        entity_type=best.entity_type,
        start=min(r.start for r in group),
        end=max(r.end for r in group),
        score=best.score,
    )


# Numbers people write with arbitrary grouping: "4111 1111 1111 1111" is "4111-1111-1111-1111".
_GROUPED_NUMBER_ENTITIES: frozenset[str] = frozenset({"CREDIT_CARD", "IBAN_CODE", "PHONE_NUMBER"})


def _identity(entity_type: str, value: str) -> str:
    """What makes two mentions "the same value" for numbering.

    Names, addresses and hosts are the same whatever their case or spacing ("John  Smith",
    "john smith"); card, account and phone numbers whatever their separators; secrets are
    compared exactly, so "Hunter2" and "hunter2" stay different.
    """
    if entity_type in SECRET_ENTITIES:
        return value
    if entity_type in _GROUPED_NUMBER_ENTITIES:
        return "".join(char for char in value if char.isalnum()).casefold()
    return " ".join(value.split()).casefold()


def _substitute(
    text: str,
    results: Sequence[RecognizerResult],
    number_of: Callable[[str, str], int] | None = None,
) -> Redaction:
    """Replace non-overlapping ``results`` (in text order) with numbered placeholders: by
    ``number_of(type, identity)``, or else 1, 2, ... per type in order of first appearance."""
    numbers: dict[str, dict[str, int]] = {}
    pieces: list[str] = []
    entities: list[RedactedEntity] = []
    cursor = 0
    for result in results:
        identity = _identity(result.entity_type, text[result.start : result.end])
        if number_of is not None:
            number = number_of(result.entity_type, identity)
        else:
            seen = numbers.setdefault(result.entity_type, {})
            number = seen.setdefault(identity, len(seen) + 1)
        placeholder = f"<{result.entity_type}_{number}>"
        pieces += [text[cursor : result.start], placeholder]
        entities.append(RedactedEntity(entity_type=result.entity_type, placeholder=placeholder))
        cursor = result.end
    pieces.append(text[cursor:])
    return Redaction(text="".join(pieces), entities=entities)
