"""The redaction notice: what was removed, by kind, never the value; secrets come first."""

from __future__ import annotations

from contracts.events import RedactionCount
from orchestrator.notice import redaction_notice


def counts(*kinds: str) -> list[RedactionCount]:
    return [RedactionCount(entity_type=kind, count=1) for kind in kinds]


def test_nothing_removed_means_no_notice() -> None:
    assert redaction_notice([]) is None


def test_a_password_gets_the_warning() -> None:
    notice = redaction_notice(counts("PASSWORD"))
    assert notice is not None
    assert notice.startswith("I removed a password from your message")
    assert "never share passwords, even with IT" in notice


def test_keys_and_unknown_kinds_are_secrets_to_revoke() -> None:
    for kind in ("AWS_ACCESS_KEY", "JWT", "SOMETHING_NEW"):
        notice = redaction_notice(counts(kind))
        assert notice is not None
        assert "revoke" in notice, kind


def test_personal_details_are_listed_after_the_secrets() -> None:
    notice = redaction_notice(counts("EMAIL_ADDRESS", "PERSON", "PASSWORD"))
    assert notice is not None
    assert notice.index("password") < notice.index("a name and an e-mail address")
    assert "key or token" not in notice
