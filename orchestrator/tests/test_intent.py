"""The intent classifier: category, kind, queue and scope on phrasings it was not trained on."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import pytest

from orchestrator.config import OrchestratorSettings
from orchestrator.embedding import QueryEncoder, seed_encoder
from orchestrator.intent import (
    CATEGORIES,
    KINDS,
    SCOPE_WRONGLY_REFUSED_BUDGET,
    IntentClassifier,
    IntentExamplesError,
    calibrate_scope_threshold,
    calibrated_scope_threshold,
    embed,
    fit_scope,
    load_examples,
    out_of_fold_scope_scores,
)

QUEUES = {
    "connectivity": "Network",
    "account": "Identity & Access",
    "courses": "Training",
    "documentation": "Service Desk",
    "peripheral_exchange": "Hardware Logistics",
    "peripheral_question": "Desktop Support",
    "other": "Service Desk",
}

SMALL_FILE = """
queues:
  connectivity: Net Team
  account: IAM Team
categories:
  connectivity:
    informational: [how do I connect to the VPN, which wifi network is for staff]
    troubleshooting: [the VPN keeps dropping, no internet on my laptop]
  account:
    informational: [how do I change my password, how do I set up MFA]
    troubleshooting: [my account is locked, I forgot my password]
conversational: [hello there, thanks a lot]
out_of_scope: [what's the weather tomorrow, give me a lasagne recipe, who won the match]
"""


@pytest.fixture(scope="module")
def example_vectors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vector cache of this module's own, empty until ``classifier`` trains."""
    return tmp_path_factory.mktemp("intent-vectors")


@pytest.fixture(scope="module")
def classifier(encoder: QueryEncoder, example_vectors: Path) -> IntentClassifier:
    """The packaged classifier, trained on the vectors the model computes for its examples, which
    it keeps in ``example_vectors`` as the service does on its first start (embedding the
    examples is most of the module's time, so it is done once)."""
    return IntentClassifier.from_settings(
        encoder, OrchestratorSettings(), seed_encoder(encoder, example_vectors)
    )


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("ORCHESTRATOR_INTENTS_FILE", "ORCHESTRATOR_SCOPE_THRESHOLD"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("text", "category", "kind"),
    [
        (
            "my wireless connection drops every time I move to the kitchen",
            "connectivity",
            "troubleshooting",
        ),
        ("how can I get onto the corporate network from a cafe", "connectivity", "informational"),
        ("I can't remember my login details", "account", "troubleshooting"),
        ("how do I enable multi-factor authentication", "account", "informational"),
        ("can I book the advanced Excel workshop", "courses", "informational"),
        ("the e-learning module crashes halfway through", "courses", "troubleshooting"),
        (
            "where are the IT guidelines for using personal devices",
            "documentation",
            "informational",
        ),
        ("I'd like a replacement for my worn out headset", "peripheral_exchange", "informational"),
        ("my power supply is broken", "peripheral_exchange", "troubleshooting"),
        ("the printer on floor 2 won't print", "peripheral_question", "troubleshooting"),
        ("how do I hook up an external display", "peripheral_question", "informational"),
        ("Word crashes whenever I open a document", "other", "troubleshooting"),
    ],
)
def test_category_and_kind_of_held_out_phrasings(
    classifier: IntentClassifier, text: str, category: str, kind: str
) -> None:
    intent = classifier.classify(text)
    assert (intent.category, intent.kind) == (category, kind)
    assert intent.in_scope
    assert not intent.conversational
    assert 0.0 <= intent.category_confidence <= 1.0


@pytest.mark.parametrize(
    "text",
    [
        "is it going to snow tomorrow",
        "how do I bake a chocolate cake",
        "who is the president of France",
        "who won the Super Bowl",
        "tell me something funny",
        "my fridge is too warm",
        "can you walk my dog",
        "gjkdfg",
        "how do I get a hunting permit",
        "why does my hamster sleep all day",
        "what does the warning triangle on my car's dashboard mean",
        "how do you say excuse me in Portuguese",
        "why is the moon sometimes orange",
        "which running shoes are best for flat feet",
    ],
)
def test_off_topic_questions_are_refused(classifier: IntentClassifier, text: str) -> None:
    intent = classifier.classify(text)
    assert not intent.in_scope
    assert intent.scope_score < classifier.scope_threshold
    assert not intent.request_human


@pytest.mark.parametrize(
    "text",
    [
        "it doesn't work",
        "I've got a problem",
        "my computer is broken",
        "hi there, the vpn isn't working",
        "good morning, I forgot my password again",
        "help, my laptop screen is black",
    ],
)
def test_vague_complaints_and_greetings_with_a_problem_are_in_scope(
    classifier: IntentClassifier, text: str
) -> None:
    intent = classifier.classify(text)
    assert intent.in_scope
    assert not intent.conversational
    assert intent.kind == "troubleshooting"


@pytest.mark.parametrize(
    "text",
    [
        "vpn borken again, error 720",
        "outlok wont open at all",
        "pasword expired cant log on",
        "teams mic not workin",
        "printer jammed on 2nd floor again!!",
        "my laptop is sooo slow today",
        "whats the policy on personal phones on the office wifi",
    ],
)
def test_terse_and_misspelt_it_questions_are_in_scope(
    classifier: IntentClassifier, text: str
) -> None:
    assert classifier.classify(text).in_scope


@pytest.mark.parametrize("text", ["thank you very much", "see ya later", "hey there"])
def test_conversation_is_answered_not_refused(classifier: IntentClassifier, text: str) -> None:
    intent = classifier.classify(text)
    assert intent.in_scope
    assert intent.conversational


def test_asking_for_a_person_is_learned_too(classifier: IntentClassifier) -> None:
    asks = classifier.classify_many(
        ["connect me to someone from support", "please open a support case for this"]
    )
    assert all(intent.request_human and intent.in_scope for intent in asks)
    assert not classifier.classify("how do I add the office printer?").request_human


def test_categories_map_to_the_configured_queues(classifier: IntentClassifier) -> None:
    assert load_examples().queues == QUEUES
    assert classifier.classify("the VPN says authentication failed").queue == "Network"
    assert classifier.classify("my laptop charger is broken").queue == "Hardware Logistics"
    for intent in classifier.classify_many(["my account is locked", "enrol me in Excel"]):
        assert intent.queue == QUEUES[intent.category]


def test_batches_match_single_calls(classifier: IntentClassifier) -> None:
    texts = ["my webcam shows nothing", "what's 7 plus 8"]
    assert classifier.classify_many(texts) == [classifier.classify(text) for text in texts]
    assert classifier.classify_many([]) == []


def test_the_packaged_examples_cover_every_category_and_kind() -> None:
    examples = load_examples()
    assert set(examples.categories) == set(CATEGORIES)
    for group in examples.categories.values():
        assert len(group.informational) + len(group.troubleshooting) >= 35
    for kind in KINDS:
        assert sum(len(getattr(group, kind)) for group in examples.categories.values()) >= 140
    assert sum(map(len, examples.out_of_scope.values())) >= 150
    assert len(examples.request_human) >= 25


def test_a_custom_examples_file_from_the_settings(
    encoder: QueryEncoder, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "intents.yaml"
    path.write_text(SMALL_FILE)
    clean_env.setenv("ORCHESTRATOR_INTENTS_FILE", str(path))
    settings = OrchestratorSettings()
    assert settings.intents_file == path
    small = IntentClassifier.from_settings(encoder, settings)
    intent = small.classify("my VPN connection is unstable")
    assert (intent.category, intent.queue, intent.kind) == (
        "connectivity",
        "Net Team",
        "troubleshooting",
    )
    assert small.classify("I'm locked out of my account").queue == "IAM Team"
    assert not small.classify("will it rain on Sunday").in_scope
    # No request_human examples: nothing is taken for a request for a person.
    assert not small.classify("I want to talk to a human").request_human


@pytest.mark.parametrize(
    ("content", "hint"),
    [
        ("queues: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "must be a mapping"),
        (SMALL_FILE.replace("out_of_scope:", "off_topic:"), "out_of_scope"),
        (SMALL_FILE.replace("  account: IAM Team\n", ""), "no queue for account"),
        (SMALL_FILE.replace("connectivity:\n    inf", "printers:\n    inf"), "printers"),
        (SMALL_FILE.replace("informational:", "how_to:"), "how_to"),
        (SMALL_FILE.replace("[hello there, thanks a lot]", "['  ', thanks]"), "blank"),
    ],
)
def test_a_malformed_examples_file_says_what_is_wrong(
    tmp_path: Path, content: str, hint: str
) -> None:
    path = tmp_path / "intents.yaml"
    path.write_text(content)
    with pytest.raises(IntentExamplesError) as caught:
        load_examples(path)
    assert str(path) in str(caught.value)
    assert hint in str(caught.value)


def test_a_missing_examples_file_fails_at_start_up(encoder: QueryEncoder, tmp_path: Path) -> None:
    settings = OrchestratorSettings(intents_file=tmp_path / "nope.yaml")
    with pytest.raises(IntentExamplesError, match="cannot read intents file"):
        IntentClassifier.from_settings(encoder, settings)


class Untouchable:
    """An encoder that must not be asked: every training text should come from the cache."""

    def __init__(self, encoder: QueryEncoder) -> None:
        self.encoder = encoder
        self.asked = 0

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.asked += len(texts)
        return self.encoder.encode(texts)


def test_a_classifier_trained_from_the_vector_cache_classifies_exactly_alike(
    encoder: QueryEncoder, classifier: IntentClassifier, example_vectors: Path
) -> None:
    """A second start reads every example's vector back from the cache the first one filled
    (``classifier``, trained on the vectors the model computed) and classifies exactly alike."""
    watched = Untouchable(encoder)
    warm = IntentClassifier.from_settings(
        encoder,
        OrchestratorSettings(),
        seed_encoder(cast(QueryEncoder, watched), example_vectors),
    )
    assert watched.asked == 0, "a second start embeds no example again"
    messages = [
        "my VPN keeps dropping every ten minutes",
        "how do I order a new docking station",
        "what's a good lasagne recipe",
        "I want to talk to a person",
        "hello",
    ]
    assert warm.classify_many(messages) == classifier.classify_many(messages)


def test_the_default_scope_threshold_is_calibrated_on_the_packaged_examples(
    encoder: QueryEncoder, example_vectors: Path, classifier: IntentClassifier
) -> None:
    """``ORCHESTRATOR_SCOPE_THRESHOLD``'s default is what cross-validation on the packaged
    examples chooses: edit the examples, and this says what the default should now be."""
    by_text = dict(load_examples().scope_examples())
    vectors = embed(seed_encoder(encoder, example_vectors), list(by_text))
    labels = list(by_text.values())
    calibrated = calibrated_scope_threshold(vectors, labels)
    scores = out_of_fold_scope_scores(vectors, labels)
    # One step of slack: another machine's arithmetic may round one score the other way.
    assert abs(calibrated - OrchestratorSettings().scope_threshold) <= 0.011
    kept = [score for score, label in zip(scores, labels, strict=True) if "off_topic" not in label]
    refused = sum(score < calibrated for score in kept)
    # Calibrated on three cross-validations pooled; one of them alone stays near the budget.
    assert refused <= 2 * SCOPE_WRONGLY_REFUSED_BUDGET * len(kept)
    assert classifier.scope_threshold == OrchestratorSettings().scope_threshold


def test_calibration_refuses_no_more_than_the_budget_of_what_must_stay() -> None:
    kept = [i / 200 for i in range(200)]  # 0.0, 0.005, ... 0.995: must not be refused
    scores = kept + [0.9, 0.95]  # two off-topic examples scoring high: they do not count
    labels = ["it:x"] * 200 + ["off_topic:y"] * 2
    assert calibrate_scope_threshold(scores, labels, budget=0.005) == 0.0  # one below: 0.0
    assert calibrate_scope_threshold(scores, labels, budget=0.05) == 0.05  # ten below
    threshold = calibrate_scope_threshold(scores, labels, budget=0.1)
    assert sum(score < threshold for score in kept) <= 20
    assert sum(score < threshold + 0.01 for score in kept) > 20


def test_many_off_topic_groups_do_not_outweigh_one_it_group() -> None:
    """Each scope class weighs the same in training, however many groups it has: the same
    off-topic examples split into ten groups refuse what they refused as one group."""
    rng = np.random.default_rng(0)
    vectors = np.vstack(
        [rng.normal([2.0, 0.0], 0.5, (20, 2)), rng.normal([-2.0, 0.0], 0.5, (200, 2))]
    )
    one = ["it:all"] * 20 + ["off_topic:all"] * 200
    ten = ["it:all"] * 20 + [f"off_topic:{i % 10}" for i in range(200)]
    probes = np.asarray([[x, 0.0] for x in (-1.0, -0.5, 0.0, 0.5, 1.0)])
    as_one = [p["it"] for p in fit_scope(vectors, one).probabilities(probes)]
    as_ten = [p["it"] for p in fit_scope(vectors, ten).probabilities(probes)]
    assert as_ten == pytest.approx(as_one, abs=0.05)
    assert 0.3 < as_one[2] < 0.7  # midway is a toss-up, though off topic has 10 times the examples


def test_the_nearest_examples_move_the_scope_score() -> None:
    """A message right on an off-topic example scores below what the learned probability alone
    says, and one on an IT example above it."""
    rng = np.random.default_rng(1)

    def around(angle: float, n: int) -> np.ndarray:
        angles = rng.normal(angle, 0.15, n)
        return np.stack([np.cos(angles), np.sin(angles)], axis=1)

    it, island, off = around(0.0, 30), around(1.4, 1), around(np.pi, 30)
    vectors = np.vstack([it, island, off])
    labels = ["it:all"] * 30 + ["off_topic:island"] + ["off_topic:far"] * 30
    model = fit_scope(vectors, labels)
    probes = np.vstack([island, it[:1]])
    learned = [1.0 - p.get("off_topic", 0.0) for p in model.probabilities(probes)]
    scores = model.scores(probes)
    assert scores[0] < learned[0]
    assert scores[1] >= min(learned[1], 1.0) - 1e-9
    assert all(0.0 <= score <= 1.0 for score in scores)
