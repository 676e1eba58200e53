"""One contract, both backends: the local SQLite store and Jira (through the fake Jira server).

Whatever the backend, the service relies on the same behaviour: a created ticket reads back with
what was filed, updates add labels, comments and links show on the ticket, searches filter by
labels and openness newest first, attachments are listed, and the idempotency key finds the
ticket it was filed under (and only that one).
"""

from __future__ import annotations

import pytest

from ticketing.backends.base import (
    DESKPILOT_LABEL,
    TicketBackend,
    TicketDraft,
    TicketNotFound,
    TicketQuery,
    idempotency_label,
    topic_label,
    user_label,
)


def draft(n: int = 1, **overrides: object) -> TicketDraft:
    values: dict[str, object] = {
        "summary": f"VPN: cannot connect after password change ({n})",
        "description": "Problem: the VPN client says <ERROR_1>.\nTried: restart.",
        "labels": ["connectivity", topic_label("connectivity:vpn"), user_label("u-1")],
        "category": "connectivity",
        "queue": "Network",
        "priority": "High",
        "components": ["Network"],
        "user_id": "u-1",
        "conversation_id": f"conv-{n}",
        "idempotency_key": f"idem-{n}",
    }
    values.update(overrides)
    return TicketDraft.model_validate(values)


async def test_create_then_get_reads_back_what_was_filed(backend: TicketBackend) -> None:
    created = await backend.create(draft())
    got = await backend.get(created.key)
    assert got.key == created.key
    assert got.summary == "VPN: cannot connect after password change (1)"
    assert got.description.startswith("Problem: the VPN client says <ERROR_1>.")
    assert {DESKPILOT_LABEL, "connectivity", idempotency_label("idem-1")} <= set(got.labels)
    assert got.priority == "High"
    assert got.user_id == "u-1"
    # Jira keeps only an opaque reference of the conversation (everyone who may browse the issue
    # reads its properties); the ticketing service adds the id to the records it publishes.
    assert got.conversation_id == ("conv-1" if backend.name == "local" else None)
    assert got.category == "connectivity"
    assert got.queue == "Network"
    assert got.url.endswith(created.key)
    assert not backend.is_done(got)
    assert got.created_at is not None


async def test_get_of_an_unknown_key_is_not_found(backend: TicketBackend) -> None:
    with pytest.raises(TicketNotFound):
        await backend.get("NOPE-999")


async def test_update_changes_fields_and_adds_labels(backend: TicketBackend) -> None:
    created = await backend.create(draft())
    updated = await backend.update(
        created.key, summary="VPN: still failing", add_labels=["incident-inc-7"]
    )
    assert updated.summary == "VPN: still failing"
    assert "incident-inc-7" in updated.labels
    assert "connectivity" in updated.labels  # added, never replaced
    assert (await backend.get(created.key)).summary == "VPN: still failing"


async def test_comments_and_links_show_on_the_ticket(backend: TicketBackend) -> None:
    first = await backend.create(draft(1))
    second = await backend.create(draft(2, idempotency_key="idem-2"))
    await backend.comment(first.key, "The user tried again.")
    await backend.link(first.key, second.key)
    first_now = await backend.get(first.key)
    assert first_now.comments == ["The user tried again."]
    assert first_now.links == [second.key]
    assert (await backend.get(second.key)).links == [first.key]


async def test_search_filters_by_labels_and_openness_newest_first(backend: TicketBackend) -> None:
    a = await backend.create(draft(1))
    b = await backend.create(draft(2))
    other = await backend.create(
        draft(3, labels=["account", user_label("u-2")], user_id="u-2", components=[])
    )
    mine = await backend.search(TicketQuery(labels=[user_label("u-1")]))
    assert [r.key for r in mine] == [b.key, a.key]
    assert [r.key for r in await backend.search(TicketQuery(labels=["account"]))] == [other.key]
    resolved = await backend.resolve(a.key)
    assert backend.is_done(resolved)
    assert await backend.status(a.key) == resolved.status
    open_mine = await backend.search(TicketQuery(labels=[user_label("u-1")], open_only=True))
    assert [r.key for r in open_mine] == [b.key]
    assert len(await backend.search(TicketQuery(labels=[user_label("u-1")], limit=1))) == 1


async def test_attachments_are_listed_with_their_size(backend: TicketBackend) -> None:
    created = await backend.create(draft())
    attachment_id = await backend.add_attachment(created.key, "transcript.txt", b"hello " * 100)
    assert attachment_id
    assert await backend.attachments(created.key) == [("transcript.txt", 600)]


async def test_idempotency_key_finds_its_ticket_and_create_never_files_twice(
    backend: TicketBackend,
) -> None:
    assert await backend.find_by_idempotency_key("idem-1") is None
    created = await backend.create(draft(1))
    await backend.create(draft(2, idempotency_key="idem-2"))
    found = await backend.find_by_idempotency_key("idem-1")
    assert found is not None
    assert found.key == created.key
    again = await backend.create(draft(1, summary="a retry of the same request"))
    assert again.key == created.key
    assert len(await backend.search(TicketQuery(labels=[user_label("u-1")]))) == 2
