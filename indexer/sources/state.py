"""A source's sync state in Redis, so any indexer replica can run or resume its sync.

Under ``deskpilot:indexer:source:<name>:``:

* ``cursor``: where the listing resumes (a next link, a delta link); written only after every
  change listed before it is committed;
* ``docs``: hash, document key -> ``{"v": version, "h": content hash, "g": generation, "d": doc
  id, "c": the chunker's fingerprint}`` of what is indexed;
* ``seen``: set of keys a complete listing in progress has listed (sources that list everything
  each run: what is not seen by the end is deleted); ``seen:<prefix>`` the same for a complete
  listing of the keys under a prefix (a library a delta source enumerates afresh), kept from the
  listing's first page to its last, across runs stopped in between (a run that ends drops any
  left open);
* ``failed``: hash, key -> version of documents that failed; the next run retries them first;
* ``retired``: sorted set, chunk id -> when its generation was replaced; deleted after a grace
  period, so a reader that read the previous generation just before the switch still finds it;
* ``run``: hash, the run in progress (its id and counts so far), so a resumed run keeps both;
* ``lock``: held by the replica running the sync, with a expiry it renews page by page, so a
  replica that died frees the source within :data:`LOCK_TTL_MS`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis

from contracts.events import SyncSummary
from contracts.live import EPOCH_KEY, LIVE_KEY

PREFIX = "deskpilot:indexer:source:"
LOCK_TTL_MS = 120_000
COUNTS = ("new", "changed", "unchanged", "deleted", "failed")


@dataclass(frozen=True, slots=True)
class KnownDocument:
    """What the index holds of one source document."""

    version: str
    content_hash: str
    generation: str
    doc_id: str
    chunking: str | None = None
    """The chunker's fingerprint (settings and algorithm) the chunks were made with; None for
    documents recorded before it was kept (taken as made with the current settings)."""


class SyncState:
    """One source's cursor, documents, run and lock (``client``: a synchronous redis client)."""

    def __init__(self, client: redis.Redis, source: str) -> None:
        self.client = client
        self.source = source
        self._prefix = f"{PREFIX}{source}:"
        self._token = uuid.uuid4().hex

    def _key(self, part: str) -> str:
        return self._prefix + part

    # -- the lock ---------------------------------------------------------------------------

    def acquire(self) -> bool:
        return bool(self.client.set(self._key("lock"), self._token, nx=True, px=LOCK_TTL_MS))

    def renew(self) -> None:
        self.client.set(self._key("lock"), self._token, xx=True, px=LOCK_TTL_MS)

    def release(self) -> None:
        # Only our own lock: compare and delete in one step.
        self.client.eval(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
            "end return 0",
            1,
            self._key("lock"),
            self._token,
        )

    # -- cursor and run ---------------------------------------------------------------------

    def cursor(self) -> str | None:
        raw = self.client.get(self._key("cursor"))
        return _text(raw) if raw is not None else None

    def begin(self) -> tuple[str, SyncSummary, bool]:
        """The run to continue (its id and counts so far, and True) or a new one (False)."""
        raw: dict[Any, Any] = self.client.hgetall(self._key("run"))
        if raw:
            fields = {_text(k): _text(v) for k, v in raw.items()}
            counts = {name: int(fields.get(name, 0)) for name in COUNTS}
            summary = SyncSummary(total=sum(counts.values()), **counts)
            return fields["run_id"], summary, True
        run_id = uuid.uuid4().hex
        pipe = self.client.pipeline()
        pipe.hset(self._key("run"), mapping={"run_id": run_id, **dict.fromkeys(COUNTS, 0)})
        pipe.delete(self._key("seen"))
        pipe.execute()
        return run_id, SyncSummary(), False

    def commit_page(
        self,
        cursor: str | None,
        counts: dict[str, int],
        seen: Iterable[str],
        scope: str = "",
        *,
        first: bool = False,
        last: bool = False,
    ) -> None:
        """Move the cursor past a page whose changes are all committed, with the page's counts
        and the keys it listed of a complete listing of ``scope``, in one transaction.
        ``first``: the listing (re)starts here, so keys an earlier, unfinished listing of
        ``scope`` named are forgotten; ``last``: it ends here (swept already), so they all are."""
        pipe = self.client.pipeline(transaction=True)
        if cursor is None:
            pipe.delete(self._key("cursor"))
        else:
            pipe.set(self._key("cursor"), cursor)
        for name, value in counts.items():
            if value:
                pipe.hincrby(self._key("run"), name, value)
        seen_key = self._seen_key(scope)
        keys = list(seen)
        if first or last:
            pipe.delete(seen_key)
        if keys and not last:
            pipe.sadd(seen_key, *keys)
        pipe.execute()

    def count(self, name: str, value: int = 1) -> None:
        self.client.hincrby(self._key("run"), name, value)

    def finish(self) -> None:
        """The run is over: the next one starts a new run (from the cursor kept). A listing
        that ran to its end closed every complete listing of a prefix it opened; one still
        open was abandoned by the source (a library no longer configured): its keys go too."""
        abandoned = list(self.client.scan_iter(match=self._key("seen:*"), count=500))
        self.client.delete(self._key("run"), self._key("seen"), *abandoned)

    def seen(self, scope: str = "") -> set[str]:
        """Keys listed so far by the complete listing of ``scope`` in progress."""
        return {_text(key) for key in self.client.smembers(self._seen_key(scope))}

    def _seen_key(self, scope: str) -> str:
        # A whole-source listing keeps its set for the run (cleared when a run begins); a scoped
        # one from its first page to its last, across runs if a run stops in between.
        return self._key("seen") if not scope else self._key(f"seen:{scope}")

    # -- documents --------------------------------------------------------------------------

    def known(self, key: str) -> KnownDocument | None:
        raw = self.client.hget(self._key("docs"), key)
        return None if raw is None else _known(raw)

    def known_many(self, keys: list[str]) -> dict[str, KnownDocument]:
        """What is indexed of each of ``keys`` that is known (one HMGET)."""
        if not keys:
            return {}
        values = self.client.hmget(self._key("docs"), keys)
        return {key: _known(raw) for key, raw in zip(keys, values, strict=True) if raw is not None}

    def keys(self) -> set[str]:
        return {_text(key) for key in self.client.hkeys(self._key("docs"))}

    def document_count(self) -> int:
        return int(self.client.hlen(self._key("docs")))

    def remember(self, key: str, known: KnownDocument) -> None:
        value = {"v": known.version, "h": known.content_hash, "g": known.generation}
        if known.chunking is not None:
            value["c"] = known.chunking
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self._key("docs"), key, json.dumps({**value, "d": known.doc_id}))
        pipe.hdel(self._key("failed"), key)
        pipe.execute()

    def forget(self, key: str) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(self._key("docs"), key)
        pipe.hdel(self._key("failed"), key)
        pipe.execute()

    def forget_many(self, keys: list[str], counter: str | None = None) -> None:
        """Forget ``keys`` (indexed or failed) and, in the same transaction, add how many were
        indexed to the field ``deleted`` of the hash ``counter`` (default: the run's), so a
        removal stopped and done again counts each document once."""
        if not keys:
            return
        counted = len(self.known_many(keys))
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(self._key("docs"), *keys)
        pipe.hdel(self._key("failed"), *keys)
        if counted:
            pipe.hincrby(counter or self._key("run"), "deleted", counted)
        pipe.execute()

    def forget_failed(self, keys: list[str]) -> None:
        """No longer retry ``keys``."""
        if keys:
            self.client.hdel(self._key("failed"), *keys)

    def fail(self, key: str, version: str) -> None:
        self.client.hset(self._key("failed"), key, version)

    def failed(self) -> dict[str, str]:
        raw: dict[Any, Any] = self.client.hgetall(self._key("failed"))
        return {_text(k): _text(v) for k, v in raw.items()}

    # -- what readers see -------------------------------------------------------------------

    def publish(self, doc_id: str, generation: str) -> None:
        """Switch readers to ``generation`` of ``doc_id`` (see :mod:`contracts.live`)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(LIVE_KEY, doc_id, generation)
        pipe.incr(EPOCH_KEY)
        pipe.execute()

    def retire(self, chunk_ids: list[str]) -> None:
        """Chunks of a replaced generation, to delete once no reader can be using them."""
        if chunk_ids:
            now = time.time()
            self.client.zadd(self._key("retired"), dict.fromkeys(chunk_ids, now), nx=True)

    def retired(self, older_than_s: float) -> list[str]:
        cutoff = time.time() - older_than_s
        return [_text(i) for i in self.client.zrangebyscore(self._key("retired"), "-inf", cutoff)]

    def forget_retired(self, chunk_ids: list[str]) -> None:
        """No longer delete ``chunk_ids`` (deleted already, or live again)."""
        if chunk_ids:
            self.client.zrem(self._key("retired"), *chunk_ids)

    def hide(self, *doc_ids: str) -> None:
        """Hide every chunk of ``doc_ids`` from readers, before they are deleted."""
        if not doc_ids:
            return
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(LIVE_KEY, *doc_ids)
        pipe.incr(EPOCH_KEY)
        pipe.execute()


def _known(raw: Any) -> KnownDocument:
    value = json.loads(raw)
    return KnownDocument(value["v"], value["h"], value["g"], value["d"], value.get("c"))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
