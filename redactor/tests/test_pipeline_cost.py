"""What the redactor leaves out of its work per message to stay fast, and that it finds the same.

The spaCy pipeline runs its small sentence recogniser instead of the dependency parser and
computes its matrix products with numpy (:mod:`redactor.matmul`), and the phone recogniser reads
a number found in several regions once; ``bench_redact`` measures the time, these tests pin the
behaviour.
"""

from __future__ import annotations

import contextvars
from typing import Any

import numpy as np
import pytest
import spacy
import thinc.backends
from presidio_analyzer import AnalyzerEngine
from presidio_analyzer.nlp_engine import SpacyNlpEngine
from thinc.api import NumpyOps
from threadpoolctl import threadpool_info, threadpool_limits

from redactor.matmul import MatmulOps, use_numpy_matmul
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


@pytest.mark.parametrize(("trans1", "trans2"), [(False, False), (True, False), (False, True)])
def test_numpys_products_are_thincs(trans1: bool, trans2: bool) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((288, 60) if trans1 else (60, 288), dtype=np.float32)
    y = rng.standard_normal((96, 288) if trans2 else (288, 96), dtype=np.float32)
    expected = NumpyOps().gemm(x, y, trans1=trans1, trans2=trans2)
    ours = MatmulOps().gemm(x, y, trans1=trans1, trans2=trans2)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)
    into = np.empty_like(expected)
    assert MatmulOps().gemm(x, y, out=into, trans1=trans1, trans2=trans2) is into
    np.testing.assert_allclose(into, expected, rtol=1e-4, atol=1e-4)


def test_every_model_of_the_pipeline_computes_its_products_with_numpy(
    analyzer: AnalyzerEngine,
) -> None:
    engine = analyzer.nlp_engine
    assert isinstance(engine, SpacyNlpEngine)
    nlp = engine.get_nlp("en")
    models = [c.model for _, c in nlp.pipeline if hasattr(getattr(c, "model", None), "walk")]
    assert {"tok2vec", "ner"} <= {name for name, c in nlp.pipeline if hasattr(c, "model")}
    assert all(isinstance(node.ops, MatmulOps) for model in models for node in model.walk())


def test_numpys_blas_runs_on_one_thread_once_a_pipeline_uses_it() -> None:
    with threadpool_limits(2, user_api="blas"):  # the tests' processes start with one
        assert {pool["num_threads"] for pool in _blas_pools()} == {2}
        use_numpy_matmul(spacy.blank("en"))
        assert {pool["num_threads"] for pool in _blas_pools()} == {1}


def _blas_pools() -> list[dict[str, Any]]:
    pools = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert pools, "numpy has a BLAS"
    return pools


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


def test_a_message_redacted_in_a_new_context_looks_up_no_backend(
    redactor: Redactor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Messages are redacted in worker threads, each with a copy of the event loop's context;
    the models the pipeline builds on each call must not look thinc's backend up anew."""
    looked_up: list[str] = []
    lookup = thinc.backends.get_ops

    def counted(name: str, **kwargs: Any) -> Any:
        looked_up.append(name)
        return lookup(name, **kwargs)

    monkeypatch.setattr(thinc.backends, "get_ops", counted)
    found = contextvars.Context().run(
        redactor.find, "Jacob Miller cannot reach the VPN from Leeds since Monday."
    )
    assert {f.result.entity_type for f in found} >= {"PERSON"}
    assert looked_up == []
