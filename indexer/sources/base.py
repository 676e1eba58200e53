"""What a source plugin implements: list changes since a cursor, fetch a document, read who may
read it.

A plugin knows its system's API and nothing of Chroma, Redis or the bus; :mod:`indexer.sources.sync`
turns what it reports into indexed chunks. Its methods are synchronous (the sync runs in a worker
thread, like all ingestion) and raise :class:`SourceError` with a message an operator can act on
("the app lacks Sites.Read.All"), never one that quotes a secret.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from contracts.readers import PUBLIC, Readers
from indexer.extract import ExtractedDocument

__all__ = [
    "PUBLIC",
    "Change",
    "ChangePage",
    "DocumentError",
    "Readers",
    "Source",
    "SourceError",
]


class SourceError(RuntimeError):
    """The source cannot be read (credentials, permissions, the service is down): the run stops
    at its last committed cursor, and the next run resumes there."""


class DocumentError(RuntimeError):
    """One document cannot be read or extracted; the run counts it failed and goes on."""


@dataclass(frozen=True, slots=True)
class Change:
    """One document the source listed: its key (stable within the source), its version as the
    source numbers it (a page version, an eTag), and whether it is gone."""

    key: str
    version: str
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class ChangePage:
    """A page of changes and the cursor that resumes the listing after it.

    ``cursor`` is stored only once every change of the page is committed. ``last`` marks the end
    of the listing; a source that lists everything every run (:attr:`Source.lists_everything`)
    then learns which known documents it did not list: those are deleted.

    A delta source that sometimes lists one part of itself completely (a library enumerated
    afresh because Graph no longer honours its delta link) says so with ``scope``: this page
    belongs to a complete listing of the keys starting with ``scope``. ``scope_first`` marks
    the page that starts (or starts again) that listing, ``scope_last`` the page that ends it:
    then every known document under ``scope`` the listing did not name is deleted, and nothing
    outside it. The keys listed so far are kept in the sync state, so a run stopped in the
    middle and resumed (from a cursor the source made to continue the listing) sweeps exactly
    as an uninterrupted one. Such a listing ends within the source's listing: what a run that
    reaches its end left open (a library no longer configured) is forgotten, not swept (the
    library's documents then go as no longer covered, see :meth:`Source.covered`).

    A source that lists everything marks with ``scope_first`` a page that starts its listing
    over within a run resumed midway (its configuration changed meanwhile): what the stopped
    part listed is forgotten, so the sweep at the end counts only what the new listing named.
    """

    changes: tuple[Change, ...]
    cursor: str | None
    last: bool = False
    scope: str | None = None
    scope_first: bool = False
    scope_last: bool = False
    present: tuple[str, ...] = ()
    """Keys of a complete listing that exist but have no change to apply now (a published page
    being edited keeps what is indexed): not deleted by the sweep, not touched either."""


class Source(abc.ABC):
    """One configured source (a Confluence site's spaces, a SharePoint site's libraries)."""

    kind: ClassVar[str]
    lists_everything: ClassVar[bool] = False
    """True when a run lists every document (no deletions reported): a document not listed by a
    complete run is deleted. False for delta sources, which report deletions themselves (and
    mark a complete listing of a part of themselves with :attr:`ChangePage.scope`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @abc.abstractmethod
    def changes(self, cursor: str | None) -> Iterator[ChangePage]:
        """Changes since ``cursor`` (None: from the beginning), page by page, in order."""

    def covered(self) -> tuple[str, ...] | None:
        """The key prefixes the source's configuration covers, as the current run's
        :meth:`changes` resolved it (the libraries found by their configured names, the
        configured lists' ids, the pages when they are on); None when it cannot tell (it did
        not resolve its configuration). At the end of a complete listing the sync removes every
        known document under none of them, as deleted: a part taken out of the configuration
        leaves the index at the next sync. Default None: nothing is removed so (a source that
        lists everything needs none: what its complete listing did not name goes anyway)."""
        return None

    @abc.abstractmethod
    def fetch(self, change: Change) -> ExtractedDocument:
        """The document as it is now; raises :class:`DocumentError` when this one document
        cannot be had or read, :class:`SourceError` when nothing can."""

    @abc.abstractmethod
    def permissions(self, change: Change) -> Readers:
        """Who may read the document (after :meth:`fetch` of the same change); raises like
        :meth:`fetch`."""

    def write_draft(self, draft: Draft) -> DraftLink:
        """Write ``draft`` into the source as a draft a person reviews and publishes (never
        published here); raises :class:`DraftError`. Default: the source takes no drafts."""
        raise DraftError(f"a {self.kind} source takes no drafts")

    def close(self) -> None:  # noqa: B027 - optional hook: most plugins hold a client to close
        """Release connections (default: nothing to release)."""


@dataclass(frozen=True, slots=True)
class DraftCitation:
    """A source a draft's article is drawn from, cited at its end."""

    title: str
    ref: str
    """A URL, or a ticket's key."""


@dataclass(frozen=True, slots=True)
class Draft:
    """An approved article to write as a draft: its title, Markdown body and what it cites.
    ``key`` (the proposal's id) keeps names unique where the system wants them so."""

    key: str
    title: str
    markdown: str
    citations: tuple[DraftCitation, ...] = ()


@dataclass(frozen=True, slots=True)
class DraftLink:
    """A draft written: its id in the source system and where a person opens it."""

    draft_id: str
    url: str


class DraftError(RuntimeError):
    """No draft was written. ``retry`` is true when trying again later may succeed (the service
    is down or answered 5xx); ``missing_permission`` names what the account lacks (HTTP 403)."""

    def __init__(
        self, message: str, *, retry: bool = False, missing_permission: str | None = None
    ) -> None:
        super().__init__(message)
        self.retry = retry
        self.missing_permission = missing_permission
