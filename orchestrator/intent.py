"""Intent: what a message asks for, which queue it belongs to, and whether it is IT support at all.

Every decision is learned from labelled examples kept in configuration (the packaged
``data/intents.yaml``, or the file ``ORCHESTRATOR_INTENTS_FILE`` names), never from keyword lists:
the examples are embedded once with the orchestrator's sentence encoder and one logistic
regression (:func:`make_learner`) is fitted per decision when the classifier is built, so edits to
the examples take effect on the next start. The decisions share one embedding per message:

- **scope**: IT support, a request for a person, conversation (greetings, thanks, yes/no, "what
  can you do") or off topic. Only off-topic messages are refused: users expect an assistant to
  answer "hi" and "thanks", not to decline them. The model is trained on the fine groups of the
  file (each category, each conversational and off-topic group) and their probabilities are
  summed: off-topic talk is many unrelated islands (weather, recipes, sport, ...) that one linear
  boundary separates badly from IT, while one class per island separates well. Each scope class
  weighs the same however many groups it has, the nearest examples move the score too
  (:class:`ScopeModel`), and the threshold is calibrated by cross-validation on the examples
  (:func:`calibrated_scope_threshold`): at most 0.5 % of the IT and conversational examples
  refused when judged by a model that never saw them.
- **category**: connectivity, account, courses, documentation, peripheral exchange, peripheral
  question, other; mapped to a technician queue by the same file.
- **kind**: informational (how, where, what, may I) or troubleshooting (something is broken).
- **request_human**: the user asks for a person or a ticket.

``deskpilot eval intents`` cross-validates :func:`make_learner`, the very learner used here.
"""

from __future__ import annotations

import importlib.resources
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.config import OrchestratorSettings

Kind = Literal["informational", "troubleshooting"]
Category = Literal[
    "connectivity",
    "account",
    "courses",
    "documentation",
    "peripheral_exchange",
    "peripheral_question",
    "other",
]
KINDS: tuple[Kind, ...] = get_args(Kind)
CATEGORIES: tuple[Category, ...] = get_args(Category)

# Scope classes; only OFF_TOPIC is refused. The scope model's own labels are "<class>:<group>".
SCOPE_IT = "it"
SCOPE_HUMAN = "request_human"
SCOPE_CONVERSATIONAL = "conversational"
SCOPE_OFF_TOPIC = "off_topic"

# Inverse regularisation strength. Sentence embeddings are unit vectors with small coordinates,
# so scikit-learn's default C=1 underfits. In 5-fold cross-validation on the packaged examples
# C=10 classified categories best (accuracy 0.92, against 0.89 at C=1 and 0.91 at C=3 or 30);
# kind and scope were flat from C=3 to C=100.
LEARNER_C = 10.0
EMBED_BATCH_SIZE = 64
# How many of the examples that must not be refused (IT, requests for a person, conversation) a
# calibrated scope threshold may refuse when each is judged by a model that never saw it: half of
# issue 15's target for IT questions (<= 1 % wrongly refused), kept back for questions unlike any
# example.
SCOPE_WRONGLY_REFUSED_BUDGET = 0.005
SCOPE_FOLDS = 5
# How far the nearest examples move a message's scope score (ScopeModel.scores). With 0.5, in
# cross-validation on the packaged examples and on two sets never trained on (the held-apart
# set, the Rasa help-desk file), each at its calibrated threshold, more off-topic talk was refused
# and fewer IT questions were than with the probability alone; 1.0 refused less off-topic talk
# in cross-validation and on both sets.
NEAREST_EXAMPLE_WEIGHT = 0.5


class Encoder(Protocol):
    """Sentence encoder: one L2-normalised vector per text (``QueryEncoder`` is one)."""

    def encode(self, texts: list[str]) -> list[list[float]]: ...


class IntentExamplesError(ValueError):
    """The examples file is missing, not YAML, or not shaped as the classifier needs."""


class Intent(BaseModel):
    """What one message asks for. Scores are the learned models' probabilities, 0-1 (the scope
    score also weighs the nearest examples)."""

    kind: Kind = Field(description="informational (how/where/what) or troubleshooting (broken).")
    kind_confidence: float = Field(description="Probability of `kind`.")
    category: Category = Field(description="The request's category.")
    category_confidence: float = Field(description="Probability of `category`.")
    queue: str = Field(description="The technician queue `category` maps to.")
    in_scope: bool = Field(
        description="False only for off-topic messages, which the assistant declines. "
        "Conversational turns (greetings, thanks, yes/no) are in scope."
    )
    scope_score: float = Field(
        description="How surely the message is IT support, a request for a person or "
        "conversation rather than off topic, 0-1: the learned probability, moved by how much "
        "nearer its nearest in-scope example is than its nearest off-topic one; `in_scope` "
        "compares it with the threshold."
    )
    conversational: bool = Field(
        description="A greeting, thanks, goodbye, yes/no or a question about the assistant: "
        "nothing to search for (category and kind then mean little)."
    )
    request_human: bool = Field(description="The user asks for a person or a ticket.")
    request_human_score: float = Field(description="Probability behind `request_human`.")


def _clean(texts: list[str]) -> list[str]:
    cleaned = [" ".join(text.split()) for text in texts]
    if not all(cleaned):
        raise ValueError("examples must not be blank")
    return cleaned


Groups = dict[str, list[str]]


def _grouped(value: Any) -> Any:
    """A plain list is one group called ``general``."""
    return {"general": value} if isinstance(value, list) else value


class CategoryExamples(BaseModel):
    """Examples of one category, by kind."""

    model_config = ConfigDict(extra="forbid")

    informational: list[str] = Field(default_factory=list)
    troubleshooting: list[str] = Field(default_factory=list)

    @field_validator("informational", "troubleshooting")
    @classmethod
    def _no_blank_examples(cls, texts: list[str]) -> list[str]:
        return _clean(texts)

    @model_validator(mode="after")
    def _has_examples(self) -> CategoryExamples:
        if not self.informational and not self.troubleshooting:
            raise ValueError("a category needs at least one example")
        return self


class IntentExamples(BaseModel):
    """The contents of an intents file (see the packaged ``data/intents.yaml``)."""

    model_config = ConfigDict(extra="forbid")

    queues: dict[Category, str] = Field(description="Category -> technician queue.")
    categories: dict[Category, CategoryExamples] = Field(
        description="IT requests per category, split by kind."
    )
    follow_ups: list[str] = Field(
        default_factory=list, description="In-scope IT messages without a category of their own."
    )
    request_human: list[str] = Field(
        default_factory=list, description="Asks for a person or a ticket (in scope)."
    )
    conversational: Groups = Field(
        default_factory=dict,
        description="Greetings, thanks, yes/no, questions about the assistant; by group or a list.",
    )
    out_of_scope: Groups = Field(
        description="Messages to decline as not IT support; by topic, or a list."
    )

    @field_validator("follow_ups", "request_human")
    @classmethod
    def _no_blank_examples(cls, texts: list[str]) -> list[str]:
        return _clean(texts)

    @field_validator("conversational", "out_of_scope", mode="before")
    @classmethod
    def _list_is_one_group(cls, value: Any) -> Any:
        return _grouped(value)

    @field_validator("conversational", "out_of_scope")
    @classmethod
    def _no_blank_group_examples(cls, groups: Groups) -> Groups:
        return {str(name): _clean(texts) for name, texts in groups.items()}

    @model_validator(mode="after")
    def _learnable(self) -> IntentExamples:
        if not self.categories:
            raise ValueError("`categories` needs at least one category")
        if not any(self.out_of_scope.values()):
            raise ValueError("`out_of_scope` needs examples, or nothing could ever be refused")
        unmapped = sorted(set(self.categories) - set(self.queues))
        if unmapped:
            raise ValueError(f"`queues` has no queue for {', '.join(unmapped)}")
        if any(not queue.strip() for queue in self.queues.values()):
            raise ValueError("queue names must not be empty")
        for kind in KINDS:
            if not any(getattr(group, kind) for group in self.categories.values()):
                raise ValueError(f"no category has `{kind}` examples; both kinds are needed")
        return self

    def it_examples(self) -> list[tuple[str, Category, Kind]]:
        """Every categorised IT example as (text, category, kind)."""
        return [
            (text, category, kind)
            for category, group in self.categories.items()
            for kind in KINDS
            for text in getattr(group, kind)
        ]

    def scope_examples(self) -> list[tuple[str, str]]:
        """Every example as (text, "<scope class>:<group>"), the scope model's labels."""
        return (
            [(text, f"{SCOPE_IT}:{category}") for text, category, _ in self.it_examples()]
            + [(text, f"{SCOPE_IT}:follow_up") for text in self.follow_ups]
            + [(text, f"{SCOPE_HUMAN}:all") for text in self.request_human]
            + [
                (text, f"{SCOPE_CONVERSATIONAL}:{group}")
                for group, texts in self.conversational.items()
                for text in texts
            ]
            + [
                (text, f"{SCOPE_OFF_TOPIC}:{group}")
                for group, texts in self.out_of_scope.items()
                for text in texts
            ]
        )


def load_examples(path: Path | None = None) -> IntentExamples:
    """Read and validate an intents file; ``None`` is the packaged one."""
    if path is None:
        resource = importlib.resources.files("orchestrator") / "data" / "intents.yaml"
        where, raw = "packaged data/intents.yaml", resource.read_text(encoding="utf-8")
    else:
        where = str(path)
        try:
            raw = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise IntentExamplesError(f"cannot read intents file {where}: {exc}") from exc
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise IntentExamplesError(f"intents file {where} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise IntentExamplesError(
            f"intents file {where} must be a mapping with `queues`, `categories` and "
            f"`out_of_scope`, not {type(data).__name__}"
        )
    try:
        return IntentExamples.model_validate(data)
    except ValidationError as exc:
        raise IntentExamplesError(f"intents file {where} is malformed:\n{exc}") from exc


def make_learner() -> Any:
    """The learner behind every decision here, and the one ``deskpilot eval intents`` scores."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=LEARNER_C, class_weight="balanced", max_iter=5000)


def embed(encoder: Encoder, texts: Sequence[str], batch_size: int = EMBED_BATCH_SIZE) -> Any:
    """Embed ``texts`` in batches: a float32 matrix with one row per text."""
    rows: list[list[float]] = []
    for start in range(0, len(texts), batch_size):
        rows.extend(encoder.encode(list(texts[start : start + batch_size])))
    return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)


class IntentClassifier:
    """Built once per process (a second or two on two cores); ``classify`` is thread-safe."""

    def __init__(
        self,
        encoder: Encoder,
        examples: IntentExamples,
        *,
        scope_threshold: float = 0.5,
        request_human_threshold: float = 0.5,
        training_encoder: Encoder | None = None,
    ) -> None:
        """``training_encoder`` embeds the examples (the vector cache's, for a faster start);
        ``encoder`` embeds what is classified later. Both must be the same model."""
        self.encoder = encoder
        self.queues: dict[str, str] = {str(name): queue for name, queue in examples.queues.items()}
        self.file_queues = dict(self.queues)
        self.scope_threshold = scope_threshold
        self.request_human_threshold = request_human_threshold

        scope = examples.scope_examples()
        texts = list(dict.fromkeys(text for text, _ in scope))
        matrix = embed(training_encoder or encoder, texts)
        row = {text: i for i, text in enumerate(texts)}

        def fit(samples: list[tuple[str, str]]) -> Any:
            labels = [label for _, label in samples]
            if len(set(labels)) < 2:
                return _Constant(labels[0])
            model = make_learner()
            model.fit(matrix[[row[text] for text, _ in samples]], labels)
            return model

        it = examples.it_examples()
        asks = set(examples.request_human)
        self._scope = fit_scope(matrix[[row[text] for text, _ in scope]], [g for _, g in scope])
        self._category = fit([(text, category) for text, category, _ in it])
        self._kind = fit([(text, kind) for text, _, kind in it])
        self._human = fit([(text, str(text in asks)) for text in texts])

    @classmethod
    def from_settings(
        cls,
        encoder: Encoder,
        settings: OrchestratorSettings,
        training_encoder: Encoder | None = None,
    ) -> IntentClassifier:
        """The classifier the settings describe; raises :class:`IntentExamplesError`."""
        return cls(
            encoder,
            load_examples(settings.intents_file),
            scope_threshold=settings.scope_threshold,
            request_human_threshold=settings.request_human_threshold,
            training_encoder=training_encoder,
        )

    def route(self, overrides: Mapping[str, str]) -> None:
        """Category -> queue from now on: the examples file's mapping, with the admins' runtime
        overrides (``contracts.runtime_config``) for the categories they name."""
        self.queues = {
            **self.file_queues,
            **{c: q for c, q in overrides.items() if c in self.file_queues},
        }

    def classify(self, text: str) -> Intent:
        return self.classify_many([text])[0]

    def classify_many(self, texts: Sequence[str]) -> list[Intent]:
        """Classify several messages with one batched embedding pass."""
        if not texts:
            return []
        vectors = embed(self.encoder, [" ".join(text.split()) for text in texts])
        scope = self._scope.probabilities(vectors)
        scope_scores = self._scope.scores(vectors)
        category = _probabilities(self._category, vectors)
        kind = _probabilities(self._kind, vectors)
        human = _probabilities(self._human, vectors)
        intents = []
        for i in range(len(texts)):
            scope_score = float(scope_scores[i])
            in_scope = scope_score >= self.scope_threshold
            best_category = _best(category[i])
            best_kind = _best(kind[i])
            human_score = human[i].get("True", 0.0)
            intents.append(
                Intent(
                    kind=best_kind,
                    kind_confidence=round(kind[i][best_kind], 4),
                    category=best_category,
                    category_confidence=round(category[i][best_category], 4),
                    queue=self.queues[best_category],
                    in_scope=in_scope,
                    scope_score=round(scope_score, 4),
                    conversational=in_scope and _best(scope[i]) == SCOPE_CONVERSATIONAL,
                    request_human=in_scope and human_score >= self.request_human_threshold,
                    request_human_score=round(human_score, 4),
                )
            )
        return intents


class ScopeModel:
    """Whether a message is off topic: a learned model of the examples' groups, and the
    examples themselves.

    The model is one class per fine "<scope class>:<group>" label. Each scope class weighs as
    much as any other in training, shared evenly among its groups, and each group among its
    examples: off-topic talk comes in many more groups than IT does (weather, recipes, law,
    pets, ...), and weighted per group every group added would move the boundary further into
    IT questions. A message's score adds to the model's probability that it is not off topic
    how much nearer it is to the nearest example that is not off topic than to the nearest one
    that is (cosine similarities, :data:`NEAREST_EXAMPLE_WEIGHT`): a short or odd message
    ("asdf", "operator") that no group's boundary places well is judged by its neighbours.
    """

    def __init__(self, vectors: Any, labels: Sequence[str]) -> None:
        labels = list(labels)
        off = np.asarray([_off_topic(label) for label in labels])
        self._inside = np.asarray(vectors[~off], dtype=np.float32)
        self._outside = np.asarray(vectors[off], dtype=np.float32)
        if len(set(labels)) < 2:
            self._model: Any = _Constant(labels[0])
            return
        sizes = Counter(labels)
        groups_per_class = Counter(label.split(":", 1)[0] for label in sizes)
        weights = np.asarray(
            [1.0 / (groups_per_class[label.split(":", 1)[0]] * sizes[label]) for label in labels]
        )
        self._model = make_learner().set_params(class_weight=None)
        self._model.fit(vectors, labels, sample_weight=weights * len(labels) / weights.sum())

    def probabilities(self, vectors: Any) -> list[dict[str, float]]:
        """Per message, the probability of each scope class (its groups' summed)."""
        return [_by_scope_class(p) for p in _probabilities(self._model, vectors)]

    def scores(self, vectors: Any) -> Any:
        """Per message, the scope score in [0, 1]: refused below the threshold."""
        learned = 1.0 - np.asarray(
            [p.get(SCOPE_OFF_TOPIC, 0.0) for p in self.probabilities(vectors)]
        )
        nearer = _nearest(self._inside, vectors) - _nearest(self._outside, vectors)
        return np.clip(learned + NEAREST_EXAMPLE_WEIGHT * nearer, 0.0, 1.0)


def _nearest(examples: Any, vectors: Any) -> Any:
    """Each vector's cosine similarity to its nearest example (0 without examples)."""
    if not len(examples):
        return np.zeros(len(vectors))
    return (np.asarray(vectors, dtype=np.float32) @ examples.T).max(axis=1)


def fit_scope(vectors: Any, labels: Sequence[str]) -> ScopeModel:
    """The scope model of these examples; ``deskpilot eval intents --held-apart`` cross-validates
    this very function."""
    return ScopeModel(np.asarray(vectors), labels)


def out_of_fold_scope_scores(
    vectors: Any, labels: Sequence[str], folds: int = SCOPE_FOLDS, seed: int = 0
) -> Any:
    """Each example's scope score from a scope model fitted on the other folds: how the scope
    decision treats messages it was not trained on. Folds are stratified by scope class (a group
    may have fewer examples than there are folds)."""
    from sklearn.model_selection import StratifiedKFold

    fine = np.asarray(list(labels))
    vectors = np.asarray(vectors)
    strata = np.asarray([label.split(":", 1)[0] for label in fine])
    scores = np.empty(len(fine))
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for train, test in splitter.split(vectors, strata):
        scores[test] = fit_scope(vectors[train], list(fine[train])).scores(vectors[test])
    return scores


def calibrated_scope_threshold(
    vectors: Any, labels: Sequence[str], folds: int = SCOPE_FOLDS, repeats: int = 3
) -> float:
    """:func:`calibrate_scope_threshold` on the out-of-fold scores of ``repeats`` differently
    shuffled cross-validations pooled (one alone moves the threshold by a few hundredths)."""
    runs = [out_of_fold_scope_scores(vectors, labels, folds, seed) for seed in range(repeats)]
    return calibrate_scope_threshold(np.concatenate(runs), list(labels) * repeats)


def calibrate_scope_threshold(
    scores: Any, labels: Sequence[str], budget: float = SCOPE_WRONGLY_REFUSED_BUDGET
) -> float:
    """The highest threshold (in steps of 0.01) at which at most ``budget`` of the examples that
    must not be refused score below it, given out-of-fold scores
    (:func:`out_of_fold_scope_scores`): as much off-topic talk refused as that budget allows.
    ``ORCHESTRATOR_SCOPE_THRESHOLD``'s default is this on the packaged examples
    (:func:`calibrated_scope_threshold`)."""
    kept = np.sort(
        [score for score, label in zip(scores, labels, strict=True) if not _off_topic(label)]
    )
    allowed = int(budget * len(kept))  # examples that may fall below the threshold
    # Refusing fewer than allowed + 1 of them: at most the (allowed + 1)-th lowest score.
    return float(np.floor(kept[min(allowed, len(kept) - 1)] * 100) / 100)


def _off_topic(label: str) -> bool:
    return label.split(":", 1)[0] == SCOPE_OFF_TOPIC


class _Constant:
    """Stands in for a model when the examples offer one label only (say, a single category)."""

    def __init__(self, label: str) -> None:
        self.classes_ = np.asarray([label])

    def predict_proba(self, vectors: Any) -> Any:
        return np.ones((len(vectors), 1))


def _probabilities(model: Any, vectors: Any) -> list[dict[str, float]]:
    labels = [str(label) for label in model.classes_]
    return [dict(zip(labels, map(float, row), strict=True)) for row in model.predict_proba(vectors)]


def _by_scope_class(probabilities: dict[str, float]) -> dict[str, float]:
    """Sum the fine "<class>:<group>" probabilities per scope class."""
    summed: dict[str, float] = {}
    for label, probability in probabilities.items():
        scope_class = label.split(":", 1)[0]
        summed[scope_class] = summed.get(scope_class, 0.0) + probability
    return summed


def _best(probabilities: dict[str, float]) -> str:
    return max(probabilities, key=probabilities.__getitem__)
