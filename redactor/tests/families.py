"""The two checks every family test of the redactor makes: each value of a family member is gone
from the redacted text, under a kind that is always redacted; a sentence of the same shape
without a secret gets no always-redacted kind (personal data in it may still be found)."""

from __future__ import annotations

from collections.abc import Sequence

from redactor.recognizers import ALWAYS_REDACTED
from redactor.service import Redactor


def assert_redacted(redactor: Redactor, text: str, values: Sequence[str]) -> None:
    redaction = redactor.redact(text)
    for value in values:
        assert value not in redaction.text, redaction.text
    assert {e.entity_type for e in redaction.entities} & ALWAYS_REDACTED, redaction.text


def assert_no_secret(redactor: Redactor, text: str) -> None:
    redaction = redactor.redact(text)
    found = [e.entity_type for e in redaction.entities if e.entity_type in ALWAYS_REDACTED]
    assert found == [], redaction.text
