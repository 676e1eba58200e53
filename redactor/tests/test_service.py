"""What callers of :meth:`Redactor.redact` rely on: what is replaced, how, and what is kept."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from presidio_analyzer import AnalyzerEngine, RecognizerResult
from pydantic import ValidationError

from redactor.config import RedactorSettings
from redactor.service import (
    AllowList,
    Redactor,
    SpacyModelNotInstalledError,
    _merge_overlaps,
)


def test_email_is_replaced(redactor: Redactor) -> None:
    redaction = redactor.redact("Please send the invoice to anna.meier@contoso.com today.")

    assert redaction.text == "Please send the invoice to <EMAIL_ADDRESS_1> today."
    assert redaction.summary() == {"EMAIL_ADDRESS": 1}


@pytest.mark.parametrize(
    "phone",
    ["212-555-0187", "(212) 555-0187", "+1 212 555 0187", "+44 20 7946 0958"],
)
def test_phone_number_is_replaced(redactor: Redactor, phone: str) -> None:
    redaction = redactor.redact(f"Call me back on {phone} after lunch")

    assert redaction.text == "Call me back on <PHONE_NUMBER_1> after lunch"


def test_person_name_is_replaced(redactor: Redactor) -> None:
    redaction = redactor.redact("My name is John Smith and my laptop will not boot.")

    assert redaction.text == "My name is <PERSON_1> and my laptop will not boot."
    assert redaction.summary() == {"PERSON": 1}


def test_location_is_replaced(redactor: Redactor) -> None:
    redaction = redactor.redact("I am working from Berlin this week.")

    assert redaction.text == "I am working from <LOCATION_1> this week."


@pytest.mark.parametrize("address", ["10.20.30.40", "192.168.1.254", "2001:db8::8a2e:370:7334"])
def test_ip_address_is_replaced(redactor: Redactor, address: str) -> None:
    redaction = redactor.redact(f"The host {address} does not answer pings")

    assert redaction.text == "The host <IP_ADDRESS_1> does not answer pings"


@pytest.mark.parametrize("card", ["4111 1111 1111 1111", "5555-5555-5555-4444", "378282246310005"])
def test_credit_card_with_valid_checksum_is_replaced(redactor: Redactor, card: str) -> None:
    redaction = redactor.redact(f"The expense tool rejected my card {card} again")

    assert redaction.text == "The expense tool rejected my card <CREDIT_CARD_1> again"


def test_iban_is_replaced(redactor: Redactor) -> None:
    redaction = redactor.redact("Refund to DE89 3704 0044 0532 0130 00 please")

    assert redaction.text == "Refund to <IBAN_CODE_1> please"


def test_url_is_replaced(redactor: Redactor) -> None:
    redaction = redactor.redact("My share is at https://files.contoso.com/u/ameier/private")

    assert redaction.text == "My share is at <URL_1>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my password is hunter2", "my password is <PASSWORD_1>"),
        (
            "My Password is now Tr0ub4dor&3 but it fails",
            "My Password is now <PASSWORD_1> but it fails",
        ),
        ("pw: X7!kq9", "pw: <PASSWORD_1>"),
        ("pass=abc123 for the share", "pass=<PASSWORD_1> for the share"),
        ("password: correct-horse-battery", "password: <PASSWORD_1>"),
        ("the password is: 'summer time 24'", "the password is: '<PASSWORD_1>'"),
    ],
)
def test_password_in_context_is_replaced_without_its_context(
    redactor: Redactor, text: str, expected: str
) -> None:
    redaction = redactor.redact(text)

    assert redaction.text == expected
    assert redaction.summary() == {"PASSWORD": 1}


def test_password_wins_over_other_detections_inside_it(redactor: Redactor) -> None:
    """NER may read part of a password as a name; the whole secret must still disappear."""
    redaction = redactor.redact("Hi, this is Maria Garcia, my password is Sunshine2024! thanks")

    assert redaction.text == "Hi, this is <PERSON_1>, my password is <PASSWORD_1> thanks"


@pytest.mark.parametrize(
    "text",
    [
        "My password is expired and I cannot log in",
        "The password is not accepted by the portal",
        "I need to reset my password for the printer",
        "The new password is wrong according to the login page",
    ],
)
def test_talking_about_a_password_is_not_a_password(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text).text == text


def test_same_value_gets_same_placeholder_and_new_values_count_up(redactor: Redactor) -> None:
    redaction = redactor.redact(
        "From anna@contoso.com to bob@contoso.com, then Anna@Contoso.com replied to "
        "bob@contoso.com and carol@fabrikam.com"
    )

    assert redaction.text == (
        "From <EMAIL_ADDRESS_1> to <EMAIL_ADDRESS_2>, then <EMAIL_ADDRESS_1> replied to "
        "<EMAIL_ADDRESS_2> and <EMAIL_ADDRESS_3>"
    )
    assert [entity.placeholder for entity in redaction.entities] == [
        "<EMAIL_ADDRESS_1>",
        "<EMAIL_ADDRESS_2>",
        "<EMAIL_ADDRESS_1>",
        "<EMAIL_ADDRESS_2>",
        "<EMAIL_ADDRESS_3>",
    ]
    assert redaction.summary() == {"EMAIL_ADDRESS": 5}


def test_numbering_is_per_type_and_per_call(redactor: Redactor) -> None:
    first = redactor.redact("John Smith wrote from john@contoso.com")
    second = redactor.redact("Mary Jones wrote from mary@contoso.com")

    assert first.text == "<PERSON_1> wrote from <EMAIL_ADDRESS_1>"
    assert second.text == "<PERSON_1> wrote from <EMAIL_ADDRESS_1>"


def test_passwords_are_compared_exactly(redactor: Redactor) -> None:
    redaction = redactor.redact("password: Hunter2 and later password: hunter2")

    assert redaction.text == "password: <PASSWORD_1> and later password: <PASSWORD_2>"


def test_email_domain_is_not_also_redacted_as_url(redactor: Redactor) -> None:
    """The URL recognizer also matches an e-mail's domain; only one placeholder may result."""
    redaction = redactor.redact("Write to helpdesk@contoso.com")

    assert redaction.text == "Write to <EMAIL_ADDRESS_1>"
    assert [entity.entity_type for entity in redaction.entities] == ["EMAIL_ADDRESS"]


def test_allow_listed_products_are_kept(redactor: Redactor) -> None:
    text = "Outlook and Teams crash after the VPN connects on Windows"

    redaction = redactor.redact(text)

    assert redaction.text == text
    assert redaction.entities == []


def test_allow_list_is_what_keeps_the_products(
    settings: RedactorSettings, analyzer: AnalyzerEngine
) -> None:
    """Guards the test above: without the allow-list NER does tag some of these names."""
    text = "Cisco AnyConnect fails on Windows; Jira, Firefox, SharePoint and OneDrive are fine"
    without_allow_list = Redactor(settings.model_copy(update={"allow_list": []}), analyzer=analyzer)
    with_allow_list = Redactor(settings, analyzer=analyzer)

    assert without_allow_list.redact(text).text != text
    assert with_allow_list.redact(text).text == text


def test_allow_list_does_not_protect_a_name_next_to_a_product(redactor: Redactor) -> None:
    redaction = redactor.redact("Please ask Peter Miller about the Teams licence")

    assert redaction.text == "Please ask <PERSON_1> about the Teams licence"


@pytest.mark.parametrize(
    "text",
    [
        "The printer on the third floor keeps jamming since this morning.",
        "How do I map a network drive?",
        "Excel freezes when I open large files from OneDrive",
        "",
        "   ",
    ],
)
def test_text_without_personal_data_is_unchanged(redactor: Redactor, text: str) -> None:
    redaction = redactor.redact(text)

    assert redaction.text == text
    assert redaction.entities == []
    assert redaction.summary() == {}


def test_numbers_money_and_products_are_kept_without_a_warning_each(
    redactor: Redactor, caplog: pytest.LogCaptureFixture
) -> None:
    """Entities of the model that Presidio has no name for (a count, a sum, a product) are
    neither redacted nor logged: Presidio warned once per number of every message."""
    text = "I paid 45 dollars for 3 licences of Office 365 and error 0x800704cf came 20000 times"
    with caplog.at_level(logging.INFO, logger="presidio-analyzer"):
        redaction = redactor.redact(text)

    assert redaction.text == text
    assert [r.getMessage() for r in caplog.records if r.name == "presidio-analyzer"] == []


def test_result_never_contains_original_values(redactor: Redactor) -> None:
    secrets = {
        "name": "John Smith",
        "email": "john.smith@contoso.com",
        "phone": "212-555-0187",
        "ip": "10.1.2.3",
        "card": "4111 1111 1111 1111",
        "password": "hunter2",
    }
    text = (
        f"My name is {secrets['name']}, mail {secrets['email']}, phone {secrets['phone']}. "
        f"Laptop {secrets['ip']} lost my card {secrets['card']}; my password is "
        f"{secrets['password']}"
    )

    redaction = redactor.redact(text)

    serialized = redaction.model_dump_json()
    assert redaction.summary() == {
        "PERSON": 1,
        "EMAIL_ADDRESS": 1,
        "PHONE_NUMBER": 1,
        "IP_ADDRESS": 1,
        "CREDIT_CARD": 1,
        "PASSWORD": 1,
    }
    for value in secrets.values():
        assert value not in serialized
        assert all(value not in repr(entity) for entity in redaction.entities)
    assert set(redaction.model_dump()) == {"text", "entities", "flagged"}
    assert redaction.flagged == {}
    assert all(
        set(entity.model_dump()) == {"entity_type", "placeholder"} for entity in redaction.entities
    )


def test_redaction_is_immutable(redactor: Redactor) -> None:
    redaction = redactor.redact("mail anna@contoso.com")

    with pytest.raises(ValueError, match="frozen"):
        redaction.text = "anna@contoso.com"  # type: ignore[misc]


def test_threshold_from_settings_is_applied(
    settings: RedactorSettings, analyzer: AnalyzerEngine
) -> None:
    """Phone numbers score 0.4 without context; a stricter threshold lets them through."""
    strict = Redactor(settings.model_copy(update={"score_threshold": 0.5}), analyzer=analyzer)
    text = "The line 212-555-0187 is dead"

    assert strict.redact(text).text == text


def _result(entity_type: str, start: int, end: int, score: float) -> RecognizerResult:
    return RecognizerResult(entity_type=entity_type, start=start, end=end, score=score)


def spans(results: list[RecognizerResult]) -> list[tuple[str, int, int]]:
    return [(r.entity_type, r.start, r.end) for r in results]


def test_contained_detections_give_way_to_the_higher_score_then_the_longer_span() -> None:
    merged = _merge_overlaps(
        [
            _result("URL", 10, 20, 0.5),
            _result("EMAIL_ADDRESS", 5, 20, 1.0),
            _result("PERSON", 30, 35, 0.85),
            _result("LOCATION", 30, 40, 0.85),
            _result("PERSON", 50, 55, 0.85),
            _result("LOCATION", 55, 60, 0.85),
        ]
    )

    assert spans(merged) == [
        ("EMAIL_ADDRESS", 5, 20),
        ("LOCATION", 30, 40),
        ("PERSON", 50, 55),
        ("LOCATION", 55, 60),
    ]


def test_partly_overlapping_detections_are_redacted_together() -> None:
    merged = _merge_overlaps([_result("LOCATION", 6, 20, 0.6), _result("PERSON", 0, 10, 0.85)])

    assert spans(merged) == [("PERSON", 0, 20)]


def test_overlapping_secrets_name_the_merged_span() -> None:
    merged = _merge_overlaps(
        [
            _result("PERSON", 0, 8, 0.85),
            _result("PASSWORD", 0, 9, 0.7),
            _result("URL", 20, 60, 1.0),
            _result("PASSWORD", 50, 60, 0.8),
        ]
    )

    assert spans(merged) == [("PASSWORD", 0, 9), ("PASSWORD", 20, 60)]


def test_url_carrying_a_password_is_redacted_whole(redactor: Redactor) -> None:
    redaction = redactor.redact(
        "Try https://intranet.contoso.com/login?user=ameier&password=hunter2 now"
    )

    assert redaction.text == "Try <PASSWORD_1> now"


@pytest.mark.parametrize(
    ("span", "allowed"),
    [
        ("Teams", True),
        ("teams", True),
        ("Outlook and Teams", True),
        ("the VPN", True),
        ("Cisco  AnyConnect", True),
        ("Wi-Fi", True),
        ("John from Teams", False),
        ("Teamster", False),
        ("John Smith", False),
    ],
)
def test_allow_list_covers_only_spans_made_of_allowed_terms(span: str, allowed: bool) -> None:
    allow_list = AllowList(["Teams", "Outlook", "VPN", "Cisco AnyConnect", "Wi-Fi"])

    assert allow_list.covers(span) is allowed


def test_empty_allow_list_covers_nothing() -> None:
    assert AllowList([" ", ""]).covers("Teams") is False


def test_missing_model_fails_fast_instead_of_downloading(settings: RedactorSettings) -> None:
    missing = settings.model_copy(update={"spacy_model": "xx_not_installed_model"})

    with pytest.raises(SpacyModelNotInstalledError, match="xx_not_installed_model"):
        Redactor(missing)


def test_redact_is_safe_from_worker_threads(redactor: Redactor) -> None:
    """The handler runs redact() in threads, several at once; results must not mix."""
    texts = [
        f"Ticket {n}: {name} at {name.split()[0].lower()}@contoso.com cannot reach 10.0.0.{n}"
        for n, name in enumerate(["John Smith", "Mary Jones", "Peter Miller", "Anna Meier"] * 5)
    ]
    expected = [redactor.redact(text) for text in texts]

    with ThreadPoolExecutor(max_workers=4) as pool:
        actual = list(pool.map(redactor.redact, texts))

    assert actual == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Please email jane.doe.e2e@northwind.example about it", "jane.doe.e2e@northwind.example"),
        ("Write to ops@helpdesk.corp.", "ops@helpdesk.corp"),
        ("my pc is pc-1234.corp.northwind.example, thanks", "pc-1234.corp.northwind.example"),
    ],
)
def test_values_on_internal_domains_are_hidden_whole(
    redactor: Redactor, text: str, value: str
) -> None:
    redacted = redactor.redact(text).text
    for fragment in (value, value.split("@")[-1], value.split(".")[-1] if "@" in value else value):
        assert fragment not in redacted, redacted
    assert redacted.startswith(text[: text.index(value)])


def test_device_addresses_employee_ids_and_internal_hosts(redactor: Redactor) -> None:
    result = redactor.redact(
        "E204518 here: my laptop 3C-22-FB-1A-9E-07 cannot reach build01.corp or "
        "files.northwind.internal, but build01 alone is fine"
    )
    assert result.text == (
        "<EMPLOYEE_ID_1> here: my laptop <MAC_ADDRESS_1> cannot reach <HOSTNAME_1> or "
        "<HOSTNAME_2>, but build01 alone is fine"
    )


def test_the_policy_can_flag_or_keep_a_type_but_never_a_secret(
    settings: RedactorSettings, analyzer: AnalyzerEngine
) -> None:
    lenient = Redactor(
        settings.model_copy(update={"policy": {"LOCATION": "flag", "URL": "keep"}}),
        analyzer=analyzer,
    )
    text = "I work in Berlin; see https://status.example.com, my password is Hunter-77x"
    result = lenient.redact(text)
    assert result.text == (
        "I work in Berlin; see https://status.example.com, my password is <PASSWORD_1>"
    )
    assert result.flagged == {"LOCATION": 1}
    assert result.summary() == {"PASSWORD": 1}
    with pytest.raises(ValidationError, match="always redacted"):
        RedactorSettings(policy={"PASSWORD": "keep"})
    with pytest.raises(ValidationError, match="not a regular expression"):
        RedactorSettings(hostname_patterns=["(unclosed"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pay with card 675984103431 please", "pay with card <CREDIT_CARD_1> please"),
        ("my card 4030 8743 9774 0603 788 expired", "my card <CREDIT_CARD_1> expired"),
        # Luhn-valid long numbers without a word about cards: order, serial, build numbers.
        ("order 4030874397740603788 shipped", "order 4030874397740603788 shipped"),
        ("serial 675984103431 of the laptop", "serial 675984103431 of the laptop"),
        # A card word, but the number fails the Luhn check.
        ("card 675984103432 please", "card 675984103432 please"),
    ],
)
def test_card_numbers_of_any_scheme_need_a_card_word_and_luhn(
    redactor: Redactor, text: str, expected: str
) -> None:
    assert redactor.redact(text).text == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Phone: 467 3395", "Phone: <PHONE_NUMBER_1>"),
        ("Mobile: 723 813 266", "Mobile: <PHONE_NUMBER_1>"),
        ("my phone shows error 404 500", "my phone shows error 404 500"),  # too few digits
        ("error 0x80070005 on build 20261122.3", "error 0x80070005 on build 20261122.3"),
    ],
)
def test_phone_numbers_in_national_styles_need_a_phone_word(
    redactor: Redactor, text: str, expected: str
) -> None:
    assert redactor.redact(text).text == expected
