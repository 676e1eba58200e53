"""Roles: employee, technician and admin from the identity provider's claim, and what each may
do. Tokens come from a fake OIDC provider over real HTTP (JWKS on loopback); the app is built by
``create_app`` on a real valkey (a database of its own, emptied per test)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import jwt
import pytest
import redis
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from contracts.bus import decode_entry
from contracts.events import MessageReceived
from contracts.topics import Topic
from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.deps import AdminDep, require_role
from gateway.errors import install_error_handlers
from gateway.identity import (
    ADMIN_TOKEN_IDENTITY,
    Caller,
    Identity,
    IdentityResolver,
    RoleMapper,
)
from tests.support.fake_idp import FakeIdP, new_key

ADMIN_TOKEN = "break-glass-admin-token-0123456789"
DB = 14
"""This module's own database: no other test package uses it."""
REFUSED = {"error_code": "unauthorized", "detail": "Admin credentials are missing or not valid."}
FORBIDDEN = {"error_code": "forbidden", "detail": "This account is not allowed to do that."}


# -- mapping the identity provider's roles ------------------------------------------------------


@pytest.mark.parametrize(
    ("claims", "roles"),
    [
        ({"roles": ["admin"]}, {"employee", "admin"}),
        ({"roles": ["technician", "admin"]}, {"employee", "technician", "admin"}),
        ({"roles": "technician admin"}, {"employee", "technician", "admin"}),  # scope style
        ({"roles": []}, {"employee"}),
        ({}, {"employee"}),
        ({"roles": ["Admin", "superuser", "root"]}, {"employee"}),  # unknown names: nothing
        ({"roles": [1, None, {"admin": True}, ["admin"]]}, {"employee"}),  # not names
        ({"roles": {"admin": True}}, {"employee"}),
        ({"roles": 7}, {"employee"}),
    ],
)
def test_the_default_mapping_takes_deskpilot_role_names_only(
    claims: dict[str, Any], roles: set[str]
) -> None:
    assert RoleMapper().roles(claims) == roles


def test_a_configured_mapping_replaces_the_default_names() -> None:
    mapper = RoleMapper("groups", {"IT.Technicians": "technician", "IT.Admins": "admin"})
    assert mapper.roles({"groups": ["IT.Admins", "Sales"]}) == {"employee", "admin"}
    assert mapper.roles({"groups": ["IT.Technicians"]}) == {"employee", "technician"}
    # With a mapping configured, Deskpilot's own names mean nothing by themselves.
    assert mapper.roles({"groups": ["admin"], "roles": ["admin"]}) == {"employee"}


def test_nested_and_namespaced_role_claims() -> None:
    keycloak = RoleMapper("realm_access.roles")
    assert keycloak.roles({"realm_access": {"roles": ["technician"]}}) == {
        "employee",
        "technician",
    }
    assert keycloak.roles({"realm_access": ["technician"]}) == {"employee"}
    assert keycloak.roles({"realm_access": None}) == {"employee"}
    # A namespaced claim (Auth0 style) is a claim name with dots, read as such first.
    auth0 = RoleMapper("https://northwind.example/roles")
    assert auth0.roles({"https://northwind.example/roles": ["admin"]}) == {"employee", "admin"}


def test_the_role_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_JWT_ROLES_CLAIM", "groups")
    monkeypatch.setenv("GATEWAY_JWT_ROLE_MAP", '{"IT.Admins": "admin", "IT.Desk": "technician"}')
    settings = GatewaySettings()
    assert settings.jwt_roles_claim == "groups"
    assert settings.jwt_role_map == {"IT.Admins": "admin", "IT.Desk": "technician"}
    monkeypatch.setenv("GATEWAY_JWT_ROLE_MAP", '{"IT.Admins": "superuser"}')
    with pytest.raises(ValueError, match="employee"):
        GatewaySettings()


def test_the_admin_token_is_the_admin_role_but_never_a_user() -> None:
    resolver = IdentityResolver(None, admin_token=ADMIN_TOKEN)
    caller = resolver.caller_of_header(f"Bearer {ADMIN_TOKEN}")
    assert caller == Caller(identity=ADMIN_TOKEN_IDENTITY)
    assert caller.identity is not None
    assert caller.identity.roles == {"admin"}
    assert resolver.resolve_header(f"Bearer {ADMIN_TOKEN}") is None  # chats as nobody
    assert resolver.caller_of_header(f"Bearer {ADMIN_TOKEN}x") == Caller()
    assert IdentityResolver(None, admin_token="").caller_of_header("Bearer ") == Caller()


# -- the endpoints -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def idp() -> Iterator[FakeIdP]:
    with FakeIdP() as provider:
        yield provider


@pytest.fixture
def db_url(redis_url: str) -> Iterator[str]:
    url = f"{redis_url.rsplit('/', 1)[0]}/{DB}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.close()


def settings_for(db_url: str, idp: FakeIdP, **overrides: Any) -> GatewaySettings:
    values: dict[str, Any] = {
        "redis_url": db_url,
        "admin_token": ADMIN_TOKEN,
        "jwt_jwks_url": idp.jwks_url,
        "jwt_issuer": idp.issuer,
        "jwt_audience": idp.audience,
        "jwt_leeway_s": 0,
        "turn_timeout_s": 0.3,
        "instance_id": f"test-{uuid.uuid4().hex[:8]}",
        "heartbeat_interval_s": 0.5,
        "graceful_timeout_s": 5,
    }
    values.update(overrides)
    return GatewaySettings.model_validate(values)


@pytest.fixture
def client(db_url: str, idp: FakeIdP) -> Iterator[TestClient]:
    with TestClient(create_app(settings_for(db_url, idp))) as test_client:
        yield test_client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ADMIN_CALLS = [
    ("GET", "/api/documents/doc-1"),
    ("DELETE", "/api/documents/doc-1"),
    ("GET", "/api/admin/audit?conversation_id=c-1"),
    ("DELETE", "/api/admin/conversations/c-1"),
]
TICKET_READS = [("GET", "/api/admin/tickets"), ("GET", "/api/admin/tickets/IT-1")]


def test_employees_are_forbidden_on_admin_endpoints(client: TestClient, idp: FakeIdP) -> None:
    employee = bearer(idp.issue("emp-1", roles=["employee"]))
    for method, path in ADMIN_CALLS + TICKET_READS:
        response = client.request(method, path, headers=employee)
        assert (response.status_code, response.json()) == (403, FORBIDDEN), (method, path)
        assert "www-authenticate" not in response.headers


def test_technicians_read_tickets_and_nothing_else(client: TestClient, idp: FakeIdP) -> None:
    technician = bearer(idp.issue("tech-1", roles=["technician"]))
    assert client.get("/api/admin/tickets", headers=technician).status_code == 200
    unknown = client.get("/api/admin/tickets/IT-1", headers=technician)
    assert unknown.status_code == 404  # allowed in; the ticket just does not exist
    for method, path in ADMIN_CALLS:
        response = client.request(method, path, headers=technician)
        assert (response.status_code, response.json()) == (403, FORBIDDEN), (method, path)


@pytest.mark.parametrize("credential", ["role", "admin-token"])
def test_admins_by_role_or_by_the_break_glass_token(
    client: TestClient, idp: FakeIdP, credential: str
) -> None:
    token = idp.issue("adm-1", roles=["admin"]) if credential == "role" else ADMIN_TOKEN
    expected = {
        "/api/documents/doc-1": 404,
        "/api/admin/audit?conversation_id=c-1": 200,
        "/api/admin/tickets": 200,
        "/api/admin/tickets/IT-1": 404,
    }
    for path, status in expected.items():
        assert client.get(path, headers=bearer(token)).status_code == status, path
    purge = client.delete("/api/admin/conversations/c-1", headers=bearer(token))
    assert purge.status_code == 202


def test_every_credential_problem_is_the_same_401(client: TestClient, idp: FakeIdP) -> None:
    now = int(time.time())
    stranger = new_key("RSA", kid=idp.active.kid)
    presented = {
        "missing": {},
        "not bearer": {"Authorization": f"Basic {ADMIN_TOKEN}"},
        "wrong admin token": bearer("not-the-admin-token"),
        "expired": bearer(idp.issue("adm-1", roles=["admin"], exp=now - 60)),
        "wrong audience": bearer(idp.issue("adm-1", roles=["admin"], aud="api://payroll")),
        "wrong issuer": bearer(idp.issue("adm-1", roles=["admin"], iss="https://evil.example")),
        # Role escalation: a token claiming admin, signed with the attacker's own key.
        "forged role": bearer(idp.issue("emp-1", roles=["admin"], key=stranger)),
        "garbage": bearer("a.b.c"),
    }
    for name, headers in presented.items():
        for method, path in ADMIN_CALLS + TICKET_READS:
            response = client.request(method, path, headers=headers)
            assert (response.status_code, response.json()) == (401, REFUSED), (name, path)
            assert response.headers["www-authenticate"] == "Bearer"


def test_a_role_claim_edited_into_a_real_token_is_refused(client: TestClient, idp: FakeIdP) -> None:
    header, _, signature = idp.issue("emp-1", roles=["employee"]).split(".")
    _, payload, _ = idp.issue("emp-1", roles=["admin"], key=new_key("RSA")).split(".")
    response = client.get("/api/admin/tickets", headers=bearer(f"{header}.{payload}.{signature}"))
    assert (response.status_code, response.json()) == (401, REFUSED)


def test_role_names_from_the_configured_claim_and_mapping(db_url: str, idp: FakeIdP) -> None:
    settings = settings_for(
        db_url, idp, jwt_roles_claim="groups", jwt_role_map={"IT.Admins": "admin"}
    )
    with TestClient(create_app(settings)) as mapped:
        admin = idp.issue("adm-2", groups=["IT.Admins"])
        assert mapped.get("/api/admin/tickets", headers=bearer(admin)).status_code == 200
        plain = idp.issue("emp-2", roles=["admin"], groups=["Sales"])
        assert mapped.get("/api/admin/tickets", headers=bearer(plain)).status_code == 403


def test_every_admin_route_refuses_anonymous_callers_and_employees(
    client: TestClient, idp: FakeIdP
) -> None:
    """Whatever routers are added under /api/admin (or /api/documents), none is open."""
    app = client.app
    assert isinstance(app, FastAPI)
    routes = [
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        if path.startswith(("/api/admin", "/api/documents"))
        for method in operations
    ]
    assert len(routes) >= 7
    employee = bearer(idp.issue("emp-3"))
    for method, template in routes:
        path = re.sub(r"\{[^}]+\}", "x-1", template)
        anonymous = client.request(method, path)
        assert anonymous.status_code == 401, (method, template)
        assert client.request(method, path, headers=employee).status_code == 403, (method, path)


def test_chat_stays_open_to_everyone_and_the_admin_token_is_not_a_user(
    client: TestClient, idp: FakeIdP, db_url: str
) -> None:
    client.post("/api/chat", json={"text": "printer jams", "user_id": "b-1"})
    client.post("/api/chat", json={"text": "printer jams"}, headers=bearer(idp.issue("emp-5")))
    client.post("/api/chat", json={"text": "printer jams"}, headers=bearer(ADMIN_TOKEN))
    raw = redis.Redis.from_url(db_url)
    try:
        messages = [
            decode_entry(fields, MessageReceived)  # type: ignore[arg-type]
            for _, fields in raw.xrange(Topic.MESSAGE_RECEIVED)  # type: ignore[union-attr]
        ]
    finally:
        raw.close()
    # A self-declared id names nobody, and the admin token chats as nobody: each is a new
    # anonymous user the gateway made up, unauthenticated.
    users = [(m.user_id, m.authenticated) for m in messages]
    assert users[1] == ("emp-5", True)
    for anonymous in (users[0], users[2]):
        assert re.fullmatch(r"anon:[A-Za-z0-9_-]{22}", anonymous[0])
        assert anonymous[1] is False
    assert users[0][0] != users[2][0]


def test_require_role_hands_the_route_who_called(db_url: str, idp: FakeIdP) -> None:
    """Routes record who did what from the identity the dependency returns."""
    app = FastAPI()
    app.state.identity = IdentityResolver.from_settings(settings_for(db_url, idp))
    install_error_handlers(app)

    @app.get("/whoami")
    async def whoami(caller: AdminDep) -> dict[str, str]:
        return {"user": caller.user_id, "source": caller.source}

    @app.get("/desk")
    async def desk(
        caller: Annotated[Identity, Depends(require_role("technician"))],
    ) -> dict[str, list[str]]:
        return {"roles": sorted(caller.roles)}

    with TestClient(app) as test_client:
        admin = bearer(idp.issue("adm-7", roles=["admin"]))
        assert test_client.get("/whoami", headers=admin).json() == {
            "user": "adm-7",
            "source": "token",
        }
        assert test_client.get("/whoami", headers=bearer(ADMIN_TOKEN)).json() == {
            "user": "admin-token",
            "source": "admin_token",
        }
        technician = bearer(idp.issue("tech-7", roles="technician"))
        assert test_client.get("/desk", headers=technician).json() == {
            "roles": ["employee", "technician"]
        }
        assert test_client.get("/desk", headers=admin).status_code == 200  # admin always may
        assert test_client.get("/whoami", headers=technician).status_code == 403


def test_shared_secret_tokens_carry_roles_too(db_url: str, idp: FakeIdP) -> None:
    secret = "hs256-role-test-secret-0123456789abcdef"
    settings = settings_for(
        db_url, idp, jwt_jwks_url=None, jwt_issuer=None, jwt_audience=None, jwt_secret=secret
    )
    exp = int(time.time()) + 300
    admin = jwt.encode({"sub": "adm-9", "roles": ["admin"], "exp": exp}, secret, "HS256")
    employee = jwt.encode({"sub": "emp-9", "exp": exp}, secret, "HS256")
    with TestClient(create_app(settings)) as hs256:
        assert hs256.get("/api/admin/tickets", headers=bearer(admin)).status_code == 200
        assert hs256.get("/api/admin/tickets", headers=bearer(employee)).status_code == 403
        # The identity provider's tokens mean nothing to a shared-secret gateway.
        provider = bearer(idp.issue("adm-1", roles=["admin"]))
        assert hs256.get("/api/admin/tickets", headers=provider).status_code == 401
