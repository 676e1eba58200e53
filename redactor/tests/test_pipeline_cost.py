"""What the redactor leaves out of its work per message to stay fast, and that it finds the same.

The spaCy pipeline runs its small sentence recogniser instead of the dependency parser, and the
phone recogniser reads a number found in several regions once; ``bench_redact`` measures the
time, these tests pin the behaviour.
"""

from __future__ import annotations

import spacy
from presidio_analyzer import AnalyzerEngine
from presidio_analyzer.nlp_engine import SpacyNlpEngine

from redactor.phones import VersionAwarePhoneRecognizer
from redactor.service import Redactor, without_parser


def test_the_pipeline_runs_the_sentence_recogniser_instead_of_the_parser(
    analyzer: AnalyzerEngine,
) -> None:
    engine = analyzer.nlp_engine
    assert isinstance(engine, SpacyNlpEngine)
    pipe_names = engine.get_nlp("en").pipe_names
    assert "parser" not in pipe_names
    assert "senter" in pipe_names
    doc = engine.get_nlp("en")("Jacob lives in Leeds. Since Monday the VPN fails.")
    assert [token.text for token in doc if token.is_sent_start] == ["Jacob", "Since"]


def test_a_pipeline_without_a_sentence_recogniser_keeps_its_parser() -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    without_parser(nlp)
    assert nlp.pipe_names == ["sentencizer"]


def test_a_proper_noun_before_a_common_noun_names_a_thing_not_a_person(
    redactor: Redactor,
) -> None:
    # "Logan" is a given name and an English word: a name only where the tagger reads a proper
    # noun that is no modifier of a lower-case noun.
    assert redactor.redact("the Logan key does not open the server room").entities == []
    assert [e.entity_type for e in redactor.redact("please ask Logan Smith").entities] == ["PERSON"]


def test_a_number_every_region_finds_is_reported_once_with_its_span() -> None:
    recognizer = VersionAwarePhoneRecognizer(supported_language="en")
    recognizer.load()
    text = "Maria Lopez (ext. +1 415 555 0142) and 020 7946 0958 in London"
    results = recognizer.analyze(text, ["PHONE_NUMBER"])
    assert sorted(text[r.start : r.end] for r in results) == ["+1 415 555 0142", "020 7946 0958"]
