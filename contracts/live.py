"""Which generation of a synced document readers may see, so a replacement is atomic for them.

Chroma has no transaction across calls: were a changed document's new chunks written and its
old ones deleted, a search in between would find both (or, the other way round, neither). Chunks
of a synced document (a Confluence page, a SharePoint file) therefore carry a ``generation``
(metadata, also part of their ids), and the hash :data:`LIVE_KEY` maps each such document's id to
the one generation readers may see. The indexer writes a new generation beside the published
one, then sets the hash field (one atomic HSET: the switch), and deletes the replaced
generation's chunks only after a grace period far longer than a search; it clears the field
before deleting a document that is gone at the source.

A reader that cannot read the published generations before its search (it does not know yet
which documents it will find) reads :data:`EPOCH_KEY` before, and the generations of what it
found with the epoch after (:class:`LiveReader`): an unchanged epoch means no switch happened
meanwhile, as if it had read the generations first; otherwise it searches again.

A reader reads the published generations first, then the chunks, and keeps a chunk when it has
no generation (uploads, crawled pages, the demo articles) or when its generation is the one it
read: the chunks of that generation are all written before it is published and still there for
the grace period after it is replaced, so the reader sees one version whole, never two, never
none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

LIVE_KEY = "deskpilot:sources:live"
"""Hash: doc id -> the generation readers see. Written by the indexer only."""
EPOCH_KEY = "deskpilot:sources:live-epoch"
"""A counter the indexer increments with every change of :data:`LIVE_KEY`, in the same
transaction: a reader that reads it before its search and again with the generations knows
whether a switch happened in between (then it searches again)."""


def visible(
    metadatas: Sequence[Mapping[str, Any] | None], live: Mapping[str, str | None]
) -> list[bool]:
    """For each chunk's metadata, whether a reader may see it, given ``live`` (doc id -> the
    published generation, None when none is) for at least the documents of versioned chunks."""
    shown: list[bool] = []
    for meta in metadatas:
        generation = (meta or {}).get("generation")
        if not generation:
            shown.append(True)
            continue
        shown.append(live.get(str((meta or {}).get("doc_id", ""))) == generation)
    return shown


def versioned_doc_ids(metadatas: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """The doc ids whose published generation :func:`visible` needs, once each, in order."""
    seen: dict[str, None] = {}
    for meta in metadatas:
        if meta and meta.get("generation"):
            seen.setdefault(str(meta.get("doc_id", "")), None)
    return list(seen)


class LiveReader:
    """The reader's side over a synchronous redis client (one round trip per call)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def epoch(self) -> int:
        return int(self.client.get(EPOCH_KEY) or 0)

    def read(self, doc_ids: Sequence[str]) -> tuple[int, dict[str, str | None]]:
        """The epoch and the published generation of each of ``doc_ids``, read together."""
        pipe = self.client.pipeline(transaction=True)
        pipe.get(EPOCH_KEY)
        if doc_ids:
            pipe.hmget(LIVE_KEY, list(doc_ids))
        results = pipe.execute()
        values = results[1] if doc_ids else []
        return int(results[0] or 0), {
            doc_id: (value.decode() if isinstance(value, bytes) else value)
            for doc_id, value in zip(doc_ids, values, strict=True)
        }


def read_live(client: Any, doc_ids: Sequence[str]) -> dict[str, str | None]:
    """The published generation of each of ``doc_ids`` (``client``: a synchronous redis client;
    one HMGET)."""
    if not doc_ids:
        return {}
    values = client.hmget(LIVE_KEY, list(doc_ids))
    return {
        doc_id: (value.decode() if isinstance(value, bytes) else value)
        for doc_id, value in zip(doc_ids, values, strict=True)
    }
