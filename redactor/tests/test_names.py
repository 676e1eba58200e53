"""The word lists :mod:`redactor.names` reads from spaCy's packaged languages."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

from redactor import names
from redactor.names import FOREIGN_LANGUAGES, spacy_stop_words


@pytest.mark.parametrize("language", FOREIGN_LANGUAGES)
def test_stop_words_are_spacys_own(language: str) -> None:
    module = importlib.import_module(f"spacy.lang.{language}.stop_words")
    assert spacy_stop_words(language) == frozenset(module.STOP_WORDS)
    assert len(spacy_stop_words(language)) > 100


def test_reading_them_does_not_import_the_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """French's package builds its tokenizer exceptions on import (3.7 CPU-s a process); the
    stop words alone must not pay for it. This process may have imported the packages already
    (another test's redactor), so they leave ``sys.modules`` for the test, and a fresh copy of
    :mod:`redactor.names` is executed and read, as a new process would (a subprocess cost 5-6
    CPU-s, for importing spaCy and torch again)."""

    def languages_imported() -> list[str]:
        return sorted(
            name
            for name in sys.modules
            if name.split(".")[:2] == ["spacy", "lang"]
            and name.count(".") >= 2
            and name.split(".")[2] in FOREIGN_LANGUAGES
        )

    for name in languages_imported():
        monkeypatch.delitem(sys.modules, name)
    spec = importlib.util.spec_from_file_location("fresh_redactor_names", names.__file__)
    assert spec is not None
    assert spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, fresh)  # as an import does, for its dataclasses
    spec.loader.exec_module(fresh)
    for language in fresh.FOREIGN_LANGUAGES:
        assert fresh.spacy_stop_words(language)
    assert languages_imported() == []


def test_a_language_spacy_lacks_is_a_clear_error() -> None:
    with pytest.raises(LookupError, match="no stop words for 'tlh'"):
        spacy_stop_words("tlh")
