"""The reader's groups from the token's groups claim: what a careless identity provider or an
attacker might put there never widens what a user may read, and a token forged to carry groups
is refused like any forged token."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from contracts.readers import MAX_GROUPS, MAX_PRINCIPAL_LENGTH
from gateway.config import GatewaySettings
from gateway.documents import check_readers
from gateway.errors import ApiError, ErrorCode
from gateway.identity import GroupReader, HS256Verifier, IdentityResolver, InvalidToken
from gateway.tests.hs256_tokens import AUDIENCE, ISSUER, SECRET, token, verifier

ENTRA_GROUP = "6b2f1c9e-1d2a-4c1e-9f3b-2a7d5e8c0b14"


def test_the_groups_claim_gives_the_identity_its_groups() -> None:
    identity = verifier().verify(token(groups=[ENTRA_GROUP, "hr-team"]))
    assert identity.groups == (ENTRA_GROUP, "hr-team")
    assert identity.user_id == "emp-1042"


def test_a_missing_claim_is_no_groups() -> None:
    assert verifier().verify(token()).groups == ()


def test_the_claim_is_configurable_and_may_be_nested() -> None:
    nested = verifier(groups=GroupReader("realm_access.groups"))
    presented = token(realm_access={"groups": ["it-staff"]}, groups=["ignored"])
    assert nested.verify(presented).groups == ("it-staff",)
    resolver = IdentityResolver.from_settings(
        GatewaySettings(
            jwt_secret=SECRET,
            jwt_audience=AUDIENCE,
            jwt_issuer=ISSUER,
            jwt_groups_claim="wids",
        )
    )
    identity = resolver.resolve_token(token(wids=["admins"], groups=["hr-team"]))
    assert identity is not None
    assert identity.groups == ("admins",)


@pytest.mark.parametrize(
    "claim",
    [
        "hr-team",  # a string, not a list: not split into anything
        {"hr-team": True},
        # Entra's overage form for users in more than 200 groups: a pointer, not groups.
        {"src1": "https://graph.microsoft.com/v1.0/users/x/getMemberObjects"},
        42,
        None,
    ],
)
def test_a_claim_that_is_not_a_list_gives_no_groups(claim: Any) -> None:
    assert verifier().verify(token(groups=claim)).groups == ()


def test_entries_that_are_not_group_ids_are_dropped_never_matched_by_a_part(
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd = [
        "hr-team|executives",  # would match two groups if it were split
        "",
        " hr-team",
        "x" * (MAX_PRINCIPAL_LENGTH + 1),
        "tab\there",
        7,
        None,
        ["nested"],
        {"id": "hr-team"},
        "it-staff",
        "it-staff",
    ]
    with caplog.at_level(logging.WARNING, logger="deskpilot.gateway.identity"):
        identity = verifier().verify(token(groups=odd))
    assert identity.groups == ("it-staff",)
    # The count only: a group id is not logged.
    assert "10 entries dropped" in caplog.text
    assert "executives" not in caplog.text


def test_the_number_of_groups_is_capped() -> None:
    many = [f"g-{i}" for i in range(MAX_GROUPS + 50)]
    assert len(verifier().verify(token(groups=many)).groups) == MAX_GROUPS


def test_a_forged_token_with_groups_is_refused() -> None:
    forged = token(secret="not-the-secret-0123456789abcdef-x", groups=["executives"])
    with pytest.raises(InvalidToken):
        verifier().verify(forged)
    # The same claims re-signed by someone without the secret: refused too.
    header, _, signature = token(groups=["hr-team"]).split(".")
    tampered = f"{header}.{token(groups=['executives']).split('.')[1]}.{signature}"
    with pytest.raises(InvalidToken):
        verifier().verify(tampered)
    # Unsigned ("alg": "none") with the groups of someone else.
    unsigned = ".".join(
        [
            _b64({"alg": "none", "typ": "JWT"}),
            token(groups=["executives"]).split(".")[1],
            "",
        ]
    )
    with pytest.raises(InvalidToken):
        verifier().verify(unsigned)


def _b64(value: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def test_an_hs256_verifier_without_a_group_reader_still_reads_groups() -> None:
    bare = HS256Verifier(SECRET.encode(), audience=AUDIENCE, issuer=ISSUER)
    assert bare.verify(token(groups=["hr-team"])).groups == ("hr-team",)


def test_upload_readers_are_checked_before_the_file_is_read() -> None:
    assert check_readers([], []) is None  # everyone
    readers = check_readers(["emp-1"], ["hr-team", "hr-team"])
    assert readers is not None
    assert (readers.public, readers.users, readers.groups) == (
        False,
        ("emp-1",),
        ("hr-team", "hr-team"),
    )
    assert readers.metadata()["readers_groups"] == "|hr-team|"
    for users, groups in ([], ["a|b"]), ([""], []), ([], ["x" * 300]), (["a\nb"], []):
        with pytest.raises(ApiError) as refused:
            check_readers(users, groups)
        assert refused.value.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(ApiError):
        check_readers([], [f"g{i}" for i in range(MAX_GROUPS + 1)])
