"""Who may read a knowledge-base document, and who is reading: the two sides of permission-aware
answers, shared by the indexer (which files readers on chunks), the gateway (which reads the
reader's groups from the token) and the orchestrator (which shows a reader only what they may
read).

A chunk carries its document's readers as Chroma metadata, which holds scalars only:
``readers_public`` (bool) and ``readers_users`` / ``readers_groups``, the ids joined by ``|`` and
framed by it (``|alice|bob|``), so ``|alice|`` never matches ``malice``. A chunk without these
fields (an upload without a visibility, a crawled page, a demo article) is public.

A reader is :class:`Principals`: the user id of a verified identity and the groups its token
listed. An unauthenticated reader (anonymous, ``anon:...``) has no user id and no groups and reads
public documents only. Ids are compared literally, as the source reports them and as the
identity provider puts them in the token: a SharePoint group is its Entra object id, a Confluence
group its name; a deployment whose token lists other ids than its sources grants nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PUBLIC_FIELD = "readers_public"
USERS_FIELD = "readers_users"
GROUPS_FIELD = "readers_groups"

MAX_PRINCIPAL_LENGTH = 256
"""The longest user or group id kept (Entra object ids are 36 characters, group names short)."""
MAX_GROUPS = 500
"""The most groups a reader carries. Entra ID puts at most 200 group ids in a JWT (beyond that it
sends an overage pointer instead, and the reader gets no groups); the cap bounds an event's size
whatever the identity provider does."""
SEPARATOR = "|"


def valid_principal(value: object) -> bool:
    """A user or group id that can be stored and matched: a non-empty printable string without
    the separator, at most :data:`MAX_PRINCIPAL_LENGTH` characters."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_PRINCIPAL_LENGTH
        and value.isprintable()
        and value.strip() == value
        and SEPARATOR not in value
    )


def _joined(ids: Iterable[str]) -> str:
    ids = sorted(set(ids))
    return SEPARATOR + SEPARATOR.join(ids) + SEPARATOR if ids else ""


def _split(value: Any) -> frozenset[str]:
    if not isinstance(value, str) or not value:
        return frozenset()
    return frozenset(part for part in value.split(SEPARATOR) if valid_principal(part))


@dataclass(frozen=True, slots=True)
class Readers:
    """Who may read a document: everyone (``public``), or the listed users and groups (ids of
    the source system, or of the identity provider for uploads)."""

    public: bool = True
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        bad = [value for value in (*self.users, *self.groups) if not valid_principal(value)]
        if bad:
            raise ValueError(
                f"{len(bad)} reader id(s) are not usable: each must be 1-{MAX_PRINCIPAL_LENGTH} "
                f"printable characters without '{SEPARATOR}' or surrounding spaces"
            )

    def metadata(self) -> dict[str, str | bool]:
        """The form filed on chunks (see the module's docstring)."""
        return {
            PUBLIC_FIELD: self.public,
            USERS_FIELD: _joined(self.users),
            GROUPS_FIELD: _joined(self.groups),
        }

    def fingerprint(self) -> str:
        """Changes whenever who may read changes (a sync compares it to decide on a rewrite)."""
        # Lists joined by the separator no id may contain: ("hr", "it") and ("hr,it",) differ.
        return f"{int(self.public)};{_joined(self.users)};{_joined(self.groups)}"

    @classmethod
    def of(cls, metadata: Mapping[str, Any] | None) -> Readers:
        """The readers filed on a chunk; public when it carries none."""
        metadata = metadata or {}
        public = metadata.get(PUBLIC_FIELD)
        return cls(
            public=public is not False,  # absent (or not a bool False): public
            users=tuple(sorted(_split(metadata.get(USERS_FIELD)))),
            groups=tuple(sorted(_split(metadata.get(GROUPS_FIELD)))),
        )


PUBLIC = Readers()


@dataclass(frozen=True, slots=True)
class Principals:
    """Who is reading: a verified user's id and groups. ``user_id`` None is an anonymous
    reader, who reads public documents only. ``everything`` is for operators' tools (an
    evaluation or a benchmark's baseline), never for a user's turn."""

    user_id: str | None = None
    groups: frozenset[str] = frozenset()
    everything: bool = False

    @classmethod
    def of(cls, user_id: str, groups: Iterable[str], *, authenticated: bool) -> Principals:
        """The reader of a turn: an unauthenticated user (anonymous, or an id nobody verified)
        has neither user id nor groups, whatever the event says."""
        if not authenticated or not valid_principal(user_id):
            return ANONYMOUS
        kept = frozenset(group for group in groups if valid_principal(group))
        return cls(user_id=user_id, groups=frozenset(sorted(kept)[:MAX_GROUPS]))

    def may_read(self, readers: Readers) -> bool:
        if self.everything or readers.public:
            return True
        if self.user_id is not None and self.user_id in readers.users:
            return True
        return not self.groups.isdisjoint(readers.groups)


ANONYMOUS = Principals()
EVERYONE = Principals(everything=True)


def public_only_where() -> dict[str, Any]:
    """A Chroma ``where`` that keeps public chunks only: those without a ``readers_public`` field
    count as public (Chroma's ``$ne`` matches a missing field)."""
    return {PUBLIC_FIELD: {"$ne": False}}
