"""``deskpilot eval intents``: reading labelled data, cross-validation and the refusal figures.

A hashed bag-of-words encoder stands in for the sentence model, so these tests run in well
under a second and every number is predictable.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from deploy.evals import intents as eval_intents
from deploy.evals.intents import (
    DataError,
    ScopeCase,
    Utterance,
    add_parser,
    cross_validate,
    deduplicate,
    evaluate,
    evaluate_held_apart,
    format_held_apart,
    load_held_apart,
    load_utterances,
    normalised,
    parse_held_apart,
    parse_rasa_nlu,
    read_csv,
    run_eval_intents,
    sample,
    strip_entity_annotations,
)
from orchestrator.config import OrchestratorSettings
from orchestrator.embedding import QueryEncoder, seed_encoder
from orchestrator.intent import IntentClassifier, embed, load_examples
from orchestrator.sites import SiteProfile
from orchestrator.tests.dispatch_site import SEED, dispatch_pages
from tests.support import REPO_ROOT, SHARED_DATA, vector_cache_dir

SHARED_RASA = SHARED_DATA / "intents" / "rasa-helpdesk-nlu.yml"
HELD_APART = REPO_ROOT / "orchestrator/tests/data/scope.heldapart.txt"

RASA = """\
version: "3.1"
nlu:
- intent: open_incident
  examples: |
    - open an [urgent]{"entity": "priority", "value": "high"} ticket
    - I want to open an incident, but it's [low](priority) priority
    - open a case for [Sam](person:owner) please
- intent: greet
  examples: |
    - hey
    # not an example
    - good morning
- synonym: high
  examples: |
    - urgent
- intent: weather
  examples:
    - what's the weather
    - text: will it rain
      metadata: {source: test}
"""

INTENTS_FILE = """
queues: {connectivity: Network, account: Identity}
categories:
  connectivity:
    informational: [vpn wifi network connect, wifi network vpn setup]
    troubleshooting: [vpn wifi network broken, network vpn wifi down]
  account:
    informational: [password account login change, login password account reset]
    troubleshooting: [password account login locked, account login password expired]
conversational: [hello hi thanks, thanks hello hi]
out_of_scope: [weather rain recipe cake, cake recipe rain weather, football match score weather]
"""


class HashingEncoder:
    """Bag of hashed words, L2-normalised: texts sharing words are close."""

    dimensions = 64

    def encode(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                vector[int.from_bytes(digest, "big") % self.dimensions] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            vectors.append([v / norm for v in vector])
        return vectors


def test_entity_annotations_become_plain_text() -> None:
    assert strip_entity_annotations("it's [low](priority) priority") == "it's low priority"
    assert (
        strip_entity_annotations('an [urgent]{"entity": "priority", "value": "high"} issue')
        == "an urgent issue"
    )
    assert strip_entity_annotations("[Sam](person:owner) and [Jo](person)") == "Sam and Jo"
    assert strip_entity_annotations("no [brackets] here (really)") == "no [brackets] here (really)"


def test_rasa_nlu_yaml_is_read_intent_by_intent() -> None:
    assert parse_rasa_nlu(RASA) == [
        Utterance("open an urgent ticket", "open_incident"),
        Utterance("I want to open an incident, but it's low priority", "open_incident"),
        Utterance("open a case for Sam please", "open_incident"),
        Utterance("hey", "greet"),
        Utterance("good morning", "greet"),
        Utterance("what's the weather", "weather"),
        Utterance("will it rain", "weather"),
    ]


@pytest.mark.parametrize("raw", ["nlu: [unclosed", "version: '3.1'\n", "- a\n- b\n"])
def test_what_is_not_rasa_nlu_data_is_an_error(raw: str) -> None:
    with pytest.raises(DataError):
        parse_rasa_nlu(raw)


@pytest.mark.skipif(not SHARED_RASA.is_file(), reason="shared evaluation data not present")
def test_the_shared_rasa_help_desk_file() -> None:
    utterances, data_format = load_utterances(SHARED_RASA)
    assert data_format == "rasa"
    assert len({u.label for u in utterances}) == 14
    assert "out_of_scope" in {u.label for u in utterances}
    assert not any("[" in u.text or "{" in u.text for u in utterances)


def test_csv_with_default_and_chosen_columns(tmp_path: Path) -> None:
    plain = tmp_path / "plain.csv"
    plain.write_text('text,label\nmy vpn is down,network\n"printer, jammed",hardware\n,x\n')
    assert read_csv(plain) == [
        Utterance("my vpn is down", "network"),
        Utterance("printer, jammed", "hardware"),
    ]
    tickets = tmp_path / "tickets.csv"
    tickets.write_text("Document,Topic_group\nnew charger please,Purchase\n")
    utterances, data_format = load_utterances(tickets, "Document", "Topic_group")
    assert (utterances, data_format) == ([Utterance("new charger please", "Purchase")], "csv")
    with pytest.raises(DataError, match="'Document', 'Topic_group'"):
        read_csv(tickets)


def test_unknown_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_utterances(tmp_path / "missing.csv")
    (tmp_path / "data.json").write_text("{}")
    with pytest.raises(DataError, match="expected Rasa NLU YAML"):
        load_utterances(tmp_path / "data.json")


def test_duplicates_and_sampling() -> None:
    rows = [Utterance("a", "x"), Utterance("a", "x"), Utterance("a", "y"), Utterance("b", "x")]
    assert deduplicate(rows) == [Utterance("a", "x"), Utterance("a", "y"), Utterance("b", "x")]
    assert sample(rows, None, 0) == rows
    assert sample(rows, 2, 7) == sample(rows, 2, 7)
    assert len(sample(rows, 2, 7)) == 2


def synthetic(per_label: int = 10) -> tuple[list[str], list[str]]:
    vocab = {
        "network": "vpn wifi router dns ethernet proxy",
        "account": "password login mfa locked username token",
        "weather": "rain sunny forecast snow storm cloudy",
    }
    texts, labels = [], []
    for label, words in vocab.items():
        pool = words.split()
        for i in range(per_label):
            texts.append(" ".join(pool[(i + j) % len(pool)] for j in range(3)) + f" n{i}")
            labels.append(label)
    return texts, labels


def test_cross_validation_on_a_separable_dataset() -> None:
    texts, labels = synthetic()
    result = cross_validate(embed(HashingEncoder(), texts), labels, folds=5, seed=0)
    assert result["accuracy"] == 1.0
    assert result["macro_f1"] == 1.0
    assert result["per_label"]["weather"] == {"n": 10, "precision": 1.0, "recall": 1.0, "f1": 1.0}


def test_cross_validation_scores_mistakes() -> None:
    # Two labels drawn from the same words cannot be told apart: about half is wrong.
    _, labels = synthetic()
    labels = ["network" if label == "weather" else label for label in labels[:10]] + [
        "account" if i % 2 else "other" for i in range(20)
    ]
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(30, 8))
    result = cross_validate(vectors, labels, folds=5, seed=0)
    assert 0.0 <= result["accuracy"] < 0.9
    assert set(result["per_label"]) == {"network", "account", "other"}


def write_data(tmp_path: Path) -> tuple[Path, OrchestratorSettings]:
    data = tmp_path / "data.csv"
    rows = ["text,label"]
    rows += [f"vpn wifi network problem {i},network" for i in range(6)]
    rows += [f"password login account locked {i},account" for i in range(6)]
    rows += [f"weather rain cake recipe {i},out_of_scope" for i in range(6)]
    rows += [f"hello hi thanks {i},greet" for i in range(5)]
    rows += ["only few,rare"] * 1
    data.write_text("\n".join(rows) + "\n")
    intents = tmp_path / "intents.yaml"
    intents.write_text(INTENTS_FILE)
    return data, OrchestratorSettings(intents_file=intents)


def test_evaluate_reports_cv_and_refusal_figures(tmp_path: Path) -> None:
    data, settings = write_data(tmp_path)
    report = evaluate(
        data, encoder=HashingEncoder(), settings=settings, conversational_labels=["greet"]
    )
    assert report["n"] == 23
    assert report["labels"] == {"account": 6, "greet": 5, "network": 6, "out_of_scope": 6}
    assert report["dropped_labels"] == {"rare": 1}
    assert report["cv"]["accuracy"] > 0.9
    refusal = report["refusal"]
    assert refusal["intents_file"] == str(settings.intents_file)
    assert refusal["out_of_scope_refused"]["n"] == 6
    assert refusal["out_of_scope_refused"]["rate"] == 1.0
    assert refusal["out_of_scope_refused"]["met"] is True
    assert refusal["in_scope_wrongly_refused"]["labels"] == ["account", "network"]
    assert refusal["in_scope_wrongly_refused"]["n"] == 12
    assert refusal["in_scope_wrongly_refused"]["rate"] == 0.0
    assert refusal["conversational_refused"]["n"] == 5
    assert refusal["per_label"]["out_of_scope"]["refused"] == 6
    assert "in-scope IT wrongly refused: 0/12 = 0.0%" in eval_intents.format_report(report)


def test_no_out_of_scope_label_no_refusal_figures(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    texts, labels = synthetic()
    data.write_text(
        "text,label\n" + "".join(f"{t},{x}\n" for t, x in zip(texts, labels, strict=True))
    )
    report = evaluate(data, encoder=HashingEncoder(), settings=OrchestratorSettings(), limit=20)
    assert report["refusal"] is None
    assert report["n"] == 20
    assert report["limit"] == 20


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="deskpilot eval")
    add_parser(parser.add_subparsers(dest="kind", required=True))
    return parser.parse_args(argv)


def test_the_command_prints_json_and_checks_targets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data, settings = write_data(tmp_path)
    monkeypatch.setenv("ORCHESTRATOR_INTENTS_FILE", str(settings.intents_file))
    monkeypatch.setattr(
        "orchestrator.embedding.QueryEncoder", lambda threads=None: HashingEncoder()
    )
    args = parse(
        ["intents", "--data", str(data), "--json", "--check", "--conversational-labels", "greet"]
    )
    assert args.run is run_eval_intents
    assert run_eval_intents(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["refusal"]["in_scope_wrongly_refused"]["met"] is True

    assert run_eval_intents(parse(["intents", "--data", str(tmp_path / "none.csv")])) == 2
    assert "does not exist" in capsys.readouterr().err


HELD = """\
# a comment
[out_of_scope weather]
weather rain tomorrow
  rain \t weather forecast

[out_of_scope food]
cake recipe please
[it vpn]
vpn wifi network down
[it account]
password account locked
[conversational greetings]
hi hello thanks
[request_human people]
talk to a person
"""


def test_a_held_apart_set_is_read_by_section() -> None:
    cases = parse_held_apart(HELD)
    assert cases[:2] == [
        ScopeCase("weather rain tomorrow", "out_of_scope", "weather"),
        ScopeCase("rain weather forecast", "out_of_scope", "weather"),
    ]
    assert [c.scope for c in cases] == [
        "out_of_scope", "out_of_scope", "out_of_scope", "it", "it", "conversational",
        "request_human",
    ]  # fmt: skip
    assert cases[-1] == ScopeCase("talk to a person", "request_human", "people")


@pytest.mark.parametrize(
    ("raw", "hint"),
    [
        ("hello\n[it vpn]\nvpn\n", ":1: a message before any"),
        ("[off_topic weather]\nrain\n", "unknown scope 'off_topic'"),
        ("# nothing\n[it vpn]\n", "holds no messages"),
    ],
)
def test_a_malformed_held_apart_set_says_where(raw: str, hint: str) -> None:
    with pytest.raises(DataError, match=hint):
        parse_held_apart(raw, "set.txt")


def test_the_held_apart_set_is_big_varied_and_never_trained_on() -> None:
    """Issue 15: at least 300 everyday non-IT questions of many kinds and 300 IT questions as
    employees write them, none of them (normalised) among the examples the classifier learns."""
    cases = load_held_apart(HELD_APART)
    by_scope = Counter(case.scope for case in cases)
    assert by_scope["out_of_scope"] >= 300
    assert by_scope["it"] >= 300
    assert len({c.topic for c in cases if c.scope == "out_of_scope"}) >= 15
    assert len({c.topic for c in cases if c.scope == "it"}) >= 15
    texts = [normalised(case.text) for case in cases]
    assert len(set(texts)) == len(texts), "a message is in the set twice"
    trained = {normalised(text) for text, _ in load_examples().scope_examples()}
    assert not [case.text for case in cases if normalised(case.text) in trained]


def test_normalised_folds_case_punctuation_and_spacing() -> None:
    assert normalised("  VPN won't   connect!!") == normalised("vpn won t connect")
    assert normalised("Error 0x800704CF.") == "error 0x800704cf"
    assert normalised("wifi") != normalised("wi fi x")


def test_held_apart_figures_and_scope_cross_validation(tmp_path: Path) -> None:
    held = tmp_path / "held.txt"
    held.write_text(HELD)
    intents = tmp_path / "intents.yaml"
    intents.write_text(INTENTS_FILE)
    settings = OrchestratorSettings(intents_file=intents)
    report = evaluate_held_apart(held, encoder=HashingEncoder(), settings=settings, folds=2)
    figures = report["figures"]
    assert report["n"] == 7
    assert report["also_in_training"] == []
    assert (figures["out_of_scope"]["n"], figures["it"]["n"]) == (3, 2)
    assert figures["out_of_scope"]["refused"] == 3
    assert figures["out_of_scope"]["met"] is True
    assert figures["it"]["refused"] == 0
    assert figures["it"]["met"] is True
    assert figures["conversational"]["refused"] == 0
    assert figures["per_topic"]["out_of_scope weather"] == {"refused": 2, "n": 2}
    assert figures["request_human"] == {"refused": 0, "n": 1, "rate": 0.0}
    assert figures["misses"] == []
    cv = report["cv"]
    assert cv["n"] == 13
    assert cv["out_of_scope"]["n"] == 3
    assert cv["it"]["n"] == 8
    assert cv["conversational"]["n"] == 2
    text = format_held_apart(report, show_misses=True)
    assert "out of scope refused: 3/3 = 100.0% (target >= 95%: met)" in text
    assert "IT questions wrongly refused: 0/2 = 0.0% (target <= 1%: met)" in text


def test_the_held_apart_set_warns_of_messages_also_trained_on(tmp_path: Path) -> None:
    held = tmp_path / "held.txt"
    held.write_text("[it vpn]\nVPN wifi network, broken!\n[out_of_scope x]\nweather rain\n")
    intents = tmp_path / "intents.yaml"
    intents.write_text(INTENTS_FILE)
    settings = OrchestratorSettings(intents_file=intents)
    report = evaluate_held_apart(held, encoder=HashingEncoder(), settings=settings, folds=2)
    assert report["also_in_training"] == ["VPN wifi network, broken!"]
    assert "1 messages are also in the intents file" in format_held_apart(report)


def test_the_command_checks_the_held_apart_targets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    held = tmp_path / "held.txt"
    intents = tmp_path / "intents.yaml"
    intents.write_text(INTENTS_FILE)
    monkeypatch.setenv("ORCHESTRATOR_INTENTS_FILE", str(intents))
    monkeypatch.setattr(
        "orchestrator.embedding.QueryEncoder", lambda threads=None: HashingEncoder()
    )
    held.write_text(HELD)
    args = ["intents", "--held-apart", str(held), "--folds", "2", "--check"]
    assert run_eval_intents(parse(args)) == 0
    assert "out of scope refused: 3/3" in capsys.readouterr().out
    # An IT question made of off-topic words is refused: the target fails, and --check says so.
    held.write_text(HELD + "[it odd]\nweather rain cake recipe\n")
    assert run_eval_intents(parse(args)) == 1
    assert "IT questions wrongly refused: 1/3" in capsys.readouterr().out
    assert run_eval_intents(parse(args[:-1])) == 0
    capsys.readouterr()
    assert run_eval_intents(parse(["intents"])) == 2
    assert "give --data, --held-apart or both" in capsys.readouterr().err


def test_held_apart_off_topic_messages_in_the_doubt_band_stay_refused() -> None:
    """On the held-apart scope set (never trained on), the Dispatch profile lifts at most 1 % of
    the out-of-scope messages: those in the doubt band that name one of its subjects (the real
    sentence model here: the doubt band is a band of its scores)."""
    settings = OrchestratorSettings()
    encoder = QueryEncoder()
    classifier = IntentClassifier.from_settings(
        encoder, settings, seed_encoder(encoder, vector_cache_dir())
    )
    profile = SiteProfile.build([SEED], dispatch_pages())
    cases = [case for case in load_held_apart(HELD_APART) if case.scope == "out_of_scope"]
    floor = settings.scope_threshold - settings.scope_site_margin
    intents_ = classifier.classify_many([case.text for case in cases])
    lifted = [
        case
        for case, intent in zip(cases, intents_, strict=True)
        if not intent.in_scope and intent.scope_score >= floor and profile.subjects_named(case.text)
    ]
    assert len(cases) >= 300
    assert len(lifted) <= 0.01 * len(cases), len(lifted)
