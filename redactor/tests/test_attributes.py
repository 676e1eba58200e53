"""The attribute ruler matched through an index (:mod:`redactor.attributes`) finds what spaCy's
``Matcher`` finds, in the same order, so the tags, features and lemmas the recognisers read are
unchanged; ``bench_redact`` measures the time it saves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import spacy
from presidio_analyzer import AnalyzerEngine
from presidio_analyzer.nlp_engine import SpacyNlpEngine
from spacy.language import Language
from spacy.pipeline import AttributeRuler
from spacy.tokens import Doc

from redactor.attributes import IndexedMatch, index_attribute_ruler
from redactor.tests.bench_redact import LONG, SHORT

DEV_SET = Path(__file__).parent / "data" / "secrets_pii.dev.txt"
MARK = re.compile(r"⟦[A-Z_]+\|(.*?)⟧", re.DOTALL)

ODD = [
    "",
    " ",
    "ain't nobody got time, y'all gonna see, let's go, c'm on, nothin' works",
    "there is a problem and there's another; there are two  spaces\tand a tab",
    "It AIN'T working.\n\nNew paragraph\r\n  indented",
    "Y'ALL NEED TO RESET MY PASSWORD",
    "she gets it, he got it, they gotta go",
    "<b>reset</b> &amp; <script>alert('y'all')</script> " * 40,
    "y' all gon na nothin' ain't " * 200,
]


def _dev_texts() -> list[str]:
    texts: list[str] = []
    record: list[str] = []
    for line in DEV_SET.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        if line.startswith("==="):
            if record:
                texts.append(MARK.sub(r"\1", "\n".join(record)))
            record = []
        else:
            record.append(line)
    if record:
        texts.append(MARK.sub(r"\1", "\n".join(record)))
    return texts


@pytest.fixture(scope="module")
def nlp(analyzer: AnalyzerEngine) -> Language:
    engine = analyzer.nlp_engine
    assert isinstance(engine, SpacyNlpEngine)
    return engine.get_nlp("en")


def _before_the_ruler(nlp: Language, text: str) -> Doc:
    doc = nlp.make_doc(text)
    for name, component in nlp.pipeline:
        if name == "attribute_ruler":
            return doc
        doc = component(doc)
    raise AssertionError("the pipeline has no attribute ruler")


def test_the_redactors_pipeline_matches_its_attribute_ruler_through_the_index(
    nlp: Language,
) -> None:
    ruler = nlp.get_pipe("attribute_ruler")
    assert isinstance(ruler, AttributeRuler)
    assert isinstance(ruler.match, IndexedMatch)
    doc = nlp("Y'all gonna reset it?")  # "gon" "na": a pattern of two tokens
    assert [token.lemma_ for token in doc][1:3] == ["go", "to"]


def test_the_index_finds_what_the_matcher_finds_in_the_same_order(nlp: Language) -> None:
    ruler = nlp.get_pipe("attribute_ruler")
    assert isinstance(ruler, AttributeRuler)
    indexed = IndexedMatch(ruler)  # built here: the pipeline's own could have been swapped back
    texts = [LONG, SHORT, *ODD, *_dev_texts()]
    assert len(texts) > 300
    matched = 0
    for text in texts:
        doc = _before_the_ruler(nlp, text)
        expected = AttributeRuler.match(ruler, doc)  # spaCy's own, through its Matcher
        assert indexed(doc) == expected, text
        matched += len(expected)
    assert matched > 5_000


def test_a_ruler_with_a_pattern_the_index_cannot_read_keeps_its_matcher() -> None:
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    assert isinstance(ruler, AttributeRuler)
    ruler.add([[{"LOWER": "gon", "OP": "+"}]], {"LEMMA": "go"})
    assert not index_attribute_ruler(nlp)
    assert not isinstance(ruler.match, IndexedMatch)
    assert not index_attribute_ruler(spacy.blank("en"))  # no ruler at all


def test_the_index_applies_multi_token_and_negated_patterns_as_the_matcher_does() -> None:
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    assert isinstance(ruler, AttributeRuler)
    ruler.add([[{"LOWER": "reset"}, {"LOWER": {"IN": ["my", "the"]}}]], {"LEMMA": "RESET"})
    ruler.add([[{"LOWER": {"NOT_IN": ["reset", "my"]}, "IS_SPACE": False}]], {"LEMMA": "OTHER"})
    ruler.add([[{"ORTH": {"REGEX": "^VPN"}}]], {"LEMMA": "VPN"}, index=0)
    expected = {
        text: [t.lemma_ for t in nlp(text)]
        for text in ("Reset my VPN now", "reset  the VPNs", "my reset")
    }
    assert index_attribute_ruler(nlp)
    assert {text: [t.lemma_ for t in nlp(text)] for text in expected} == expected
    assert expected["Reset my VPN now"] == ["RESET", "", "VPN", "OTHER"]
