"""The embedded ticket store: SQLite in the data directory, the default backend.

Keys are ``DP-1``, ``DP-2``...; statuses are Open, In Progress and Done. sqlite3 is blocking, so
every call runs on one dedicated thread that owns the connection (one writer, no locking games).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from contracts.events import TicketRecord
from ticketing.backends.base import (
    DESKPILOT_LABEL,
    BackendRejected,
    TicketBackend,
    TicketDraft,
    TicketNotFound,
    TicketQuery,
    idempotency_label,
    require_label_alphabet,
)
from ticketing.config import LocalConfig

T = TypeVar("T")

OPEN = "Open"
IN_PROGRESS = "In Progress"
DONE = "Done"
STATUSES = (OPEN, IN_PROGRESS, DONE)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tickets (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT UNIQUE NOT NULL,
    summary TEXT NOT NULL,
    description TEXT NOT NULL,
    status TEXT NOT NULL,
    labels TEXT NOT NULL,
    components TEXT NOT NULL,
    category TEXT, queue TEXT, priority TEXT,
    user_id TEXT, conversation_id TEXT, incident_id TEXT,
    idempotency_key TEXT UNIQUE NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS comments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ticket_key TEXT NOT NULL REFERENCES tickets(key),
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS links (
    a TEXT NOT NULL, b TEXT NOT NULL, PRIMARY KEY (a, b)
);
CREATE TABLE IF NOT EXISTS attachments (
    id TEXT PRIMARY KEY,
    ticket_key TEXT NOT NULL REFERENCES tickets(key),
    filename TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB NOT NULL,
    created_at TEXT NOT NULL
);
"""


def _now() -> str:
    return datetime.now(UTC).isoformat()


class LocalBackend(TicketBackend):
    name: ClassVar[str] = "local"

    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tickets-sqlite")
        self._db: sqlite3.Connection | None = None

    # -- the one thread that owns the connection --------------------------------------------

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, work)

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._db is None:
            self.config.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.config.path)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.executescript(_SCHEMA)
            self._db = db
        with self._db:  # one transaction per call: committed, or rolled back on error
            return work(self._db)

    async def close(self) -> None:
        def shut() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await asyncio.get_running_loop().run_in_executor(self._executor, shut)
        self._executor.shutdown(wait=True)

    # -- reading ---------------------------------------------------------------------------

    def _record(self, db: sqlite3.Connection, row: sqlite3.Row) -> TicketRecord:
        key = row["key"]
        comments = [
            r["body"]
            for r in db.execute("SELECT body FROM comments WHERE ticket_key=? ORDER BY id", (key,))
        ]
        links = [
            r[0]
            for r in db.execute(
                "SELECT b FROM links WHERE a=? UNION SELECT a FROM links WHERE b=? ORDER BY 1",
                (key, key),
            )
        ]
        return TicketRecord(
            key=key,
            url=f"{self.config.url_base}{key}",
            status=row["status"],
            summary=row["summary"],
            description=row["description"],
            labels=json.loads(row["labels"]),
            category=row["category"],
            queue=row["queue"],
            priority=row["priority"],
            user_id=row["user_id"],
            conversation_id=row["conversation_id"],
            incident_id=row["incident_id"],
            links=links,
            comments=comments,
            created_at=datetime.fromisoformat(row["created_at"]),
            updated_at=datetime.fromisoformat(row["updated_at"]),
        )

    def _row(self, db: sqlite3.Connection, key: str) -> sqlite3.Row:
        row: sqlite3.Row | None = db.execute("SELECT * FROM tickets WHERE key=?", (key,)).fetchone()
        if row is None:
            raise TicketNotFound(f"no ticket {key}")
        return row

    async def get(self, key: str) -> TicketRecord:
        return await self._run(lambda db: self._record(db, self._row(db, key)))

    async def search(self, query: TicketQuery) -> list[TicketRecord]:
        def work(db: sqlite3.Connection) -> list[TicketRecord]:
            sql = "SELECT * FROM tickets"
            params: list[Any] = []
            if query.open_only:
                sql += " WHERE status != ?"
                params.append(DONE)
            sql += " ORDER BY seq DESC"
            found = []
            for row in db.execute(sql, params):
                if set(query.labels) <= set(json.loads(row["labels"])):
                    found.append(self._record(db, row))
                    if len(found) >= query.limit:
                        break
            return found

        return await self._run(work)

    async def find_by_idempotency_key(self, idempotency_key: str) -> TicketRecord | None:
        def work(db: sqlite3.Connection) -> TicketRecord | None:
            row = db.execute(
                "SELECT * FROM tickets WHERE idempotency_key=?", (idempotency_key,)
            ).fetchone()
            return None if row is None else self._record(db, row)

        return await self._run(work)

    def is_done(self, record: TicketRecord) -> bool:
        return record.status == DONE

    # -- writing ---------------------------------------------------------------------------

    async def create(self, draft: TicketDraft) -> TicketRecord:
        def work(db: sqlite3.Connection) -> TicketRecord:
            existing = db.execute(
                "SELECT * FROM tickets WHERE idempotency_key=?", (draft.idempotency_key,)
            ).fetchone()
            if existing is not None:  # the unique key makes a second filing impossible
                return self._record(db, existing)
            labels = list(
                dict.fromkeys(
                    [DESKPILOT_LABEL, *draft.labels, idempotency_label(draft.idempotency_key)]
                )
            )
            now = _now()
            cursor = db.execute(
                "INSERT INTO tickets (key, summary, description, status, labels, components,"
                " category, queue, priority, user_id, conversation_id, incident_id,"
                " idempotency_key, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    f"pending-{uuid.uuid4().hex}",
                    draft.summary,
                    draft.description,
                    OPEN,
                    json.dumps(labels),
                    json.dumps(draft.components),
                    draft.category,
                    draft.queue,
                    draft.priority,
                    draft.user_id,
                    draft.conversation_id,
                    draft.incident_id,
                    draft.idempotency_key,
                    now,
                    now,
                ),
            )
            key = f"{self.config.key_prefix}-{cursor.lastrowid}"
            db.execute("UPDATE tickets SET key=? WHERE seq=?", (key, cursor.lastrowid))
            return self._record(db, self._row(db, key))

        return await self._run(work)

    async def update(
        self,
        key: str,
        *,
        summary: str | None = None,
        description: str | None = None,
        add_labels: list[str] | None = None,
    ) -> TicketRecord:
        require_label_alphabet(add_labels or [])

        def work(db: sqlite3.Connection) -> TicketRecord:
            row = self._row(db, key)
            if summary is not None and not summary.strip():
                raise BackendRejected("summary is empty", ["summary: required"])
            labels = list(dict.fromkeys([*json.loads(row["labels"]), *(add_labels or [])]))
            db.execute(
                "UPDATE tickets SET summary=?, description=?, labels=?, updated_at=? WHERE key=?",
                (
                    summary if summary is not None else row["summary"],
                    description if description is not None else row["description"],
                    json.dumps(labels),
                    _now(),
                    key,
                ),
            )
            return self._record(db, self._row(db, key))

        return await self._run(work)

    async def set_status(self, key: str, status: str) -> TicketRecord:
        """Move a ticket to Open, In Progress or Done (what a technician does)."""
        if status not in STATUSES:
            raise BackendRejected(f"unknown status {status!r}", [f"status: one of {STATUSES}"])

        def work(db: sqlite3.Connection) -> TicketRecord:
            self._row(db, key)
            db.execute(
                "UPDATE tickets SET status=?, updated_at=? WHERE key=?", (status, _now(), key)
            )
            return self._record(db, self._row(db, key))

        return await self._run(work)

    async def resolve(self, key: str) -> TicketRecord:
        return await self.set_status(key, DONE)

    async def comment(self, key: str, body: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            self._row(db, key)
            now = _now()
            db.execute(
                "INSERT INTO comments (ticket_key, body, created_at) VALUES (?, ?, ?)",
                (key, body, now),
            )
            db.execute("UPDATE tickets SET updated_at=? WHERE key=?", (now, key))

        await self._run(work)

    async def link(self, key: str, other_key: str) -> None:
        if key == other_key:
            raise BackendRejected("a ticket cannot link to itself", ["link: same ticket"])

        def work(db: sqlite3.Connection) -> None:
            self._row(db, key)
            self._row(db, other_key)
            a, b = sorted((key, other_key))
            db.execute("INSERT OR IGNORE INTO links (a, b) VALUES (?, ?)", (a, b))

        await self._run(work)

    async def add_attachment(self, key: str, filename: str, content: bytes) -> str:
        def work(db: sqlite3.Connection) -> str:
            self._row(db, key)
            attachment_id = uuid.uuid4().hex
            db.execute(
                "INSERT INTO attachments (id, ticket_key, filename, size, content, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (attachment_id, key, filename, len(content), content, _now()),
            )
            return attachment_id

        return await self._run(work)

    async def search_all(self) -> list[TicketRecord]:
        """Every ticket, newest first (an operator's and a test's view)."""
        return await self.search(TicketQuery(limit=100))

    async def attachments(self, key: str) -> list[tuple[str, int]]:

        def work(db: sqlite3.Connection) -> list[tuple[str, int]]:
            self._row(db, key)
            return [
                (r["filename"], r["size"])
                for r in db.execute(
                    "SELECT filename, size FROM attachments WHERE ticket_key=? ORDER BY created_at",
                    (key,),
                )
            ]

        return await self._run(work)
