"""Fixtures of the orchestrator's tests: the local chat-completions server
(``tests/support/fake_openai.py``) and the query encoder (its model loads once per session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.embedding import QueryEncoder
from tests.support.fake_openai import FakeOpenAI


@pytest.fixture(scope="session")
def encoder() -> QueryEncoder:
    """The service's query encoder; it holds nothing but the model, so tests share one."""
    return QueryEncoder()


@pytest.fixture(scope="module")
def openai_server() -> Iterator[FakeOpenAI]:
    """One server per test module, on a free loopback port."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake(openai_server: FakeOpenAI) -> FakeOpenAI:
    """The module's server, with no scripted replies, no recorded requests and the test key."""
    openai_server.reset()
    return openai_server
