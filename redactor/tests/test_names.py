"""The word lists :mod:`redactor.names` reads from spaCy's packaged languages."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from redactor.names import FOREIGN_LANGUAGES, spacy_stop_words


@pytest.mark.parametrize("language", FOREIGN_LANGUAGES)
def test_stop_words_are_spacys_own(language: str) -> None:
    module = importlib.import_module(f"spacy.lang.{language}.stop_words")
    assert spacy_stop_words(language) == frozenset(module.STOP_WORDS)
    assert len(spacy_stop_words(language)) > 100


def test_reading_them_does_not_import_the_language() -> None:
    """French's package builds its tokenizer exceptions on import (3.7 CPU-s a process); the
    stop words alone must not pay for it (a fresh process: this one may have imported it)."""
    code = (
        "import sys\n"
        "from redactor.names import FOREIGN_LANGUAGES, spacy_stop_words\n"
        "for language in FOREIGN_LANGUAGES:\n"
        "    spacy_stop_words(language)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] == ['spacy', 'lang']"
        " and m.count('.') >= 2 and m.split('.')[2] in FOREIGN_LANGUAGES))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"


def test_a_language_spacy_lacks_is_a_clear_error() -> None:
    with pytest.raises(LookupError, match="no stop words for 'tlh'"):
        spacy_stop_words("tlh")
