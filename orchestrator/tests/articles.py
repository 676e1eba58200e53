"""A small knowledge base in a real Chroma collection, written as the indexer writes it (normalised
embeddings of section path + body, the body as the document, the same metadata keys), for the
retrieval tests and the turns that retrieve."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import chromadb
from chromadb.config import Settings

from contracts.readers import Readers
from orchestrator.embedding import QueryEncoder
from orchestrator.retrieval import _Record

ARTICLES: list[tuple[str, str, str, str]] = [
    # (url, title, section, body)
    (
        "https://kb.example/password",
        "Reset your account password",
        "Reset your account password",
        "Forgot your password? Open the self-service portal, answer your security questions "
        "and choose a new password of at least fourteen characters.",
    ),
    (
        "https://kb.example/printer",
        "Add a network printer",
        "Add a network printer",
        "Every floor has a shared laser printer. Open Settings, choose Printers and scanners "
        "and click Add device.",
    ),
    (
        "https://kb.example/licence",
        "Licence server messages",
        "Licence server messages",
        "Message LX-7731 means the licence server has no free seat left for your team. "
        "Close the application on another computer and try again later.",
    ),
    (
        "https://kb.example/wifi",
        "Connect to the office Wi-Fi",
        "Connect to the office Wi-Fi",
        "Join the NW-Corp network with your account name and password; guests use NW-Guest.",
    ),
]
VPN_URL = "https://kb.example/vpn-client"
VPN_BODY = "1. Download the VPN client installer.\n2. Run it and sign in with your account."


def add(
    collection: Any,
    encoder: QueryEncoder,
    url: str,
    title: str,
    section: str,
    body: str,
    *,
    index: int = 0,
    os: str = "",
) -> str:
    """Write one chunk the way the indexer does; returns its id."""
    chunk_id = hashlib.sha256(f"{url}\n{index}\n{body}".encode()).hexdigest()[:32]
    collection.upsert(
        ids=[chunk_id],
        embeddings=encoder.encode([f"{section}\n\n{body}"]),
        documents=[body],
        metadatas=[
            {
                "doc_id": hashlib.sha256(url.encode()).hexdigest(),
                "url": url,
                "title": title,
                "section": section,
                "chunk_index": index,
                "os": os,
            }
        ],
    )
    return chunk_id


def new_collection(tmp_path: Path) -> Any:
    """An empty collection in a persistent Chroma under ``tmp_path``."""
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    return client.get_or_create_collection(
        f"test-{uuid.uuid4().hex[:12]}",
        configuration={"hnsw": {"space": "cosine"}},
        embedding_function=None,
    )


def put(
    chroma: Any,
    encoder: QueryEncoder,
    url: str,
    title: str,
    section: str,
    body: str,
    readers: Readers | None,
    *,
    index: int = 0,
) -> str:
    """One chunk as the indexer writes it, with its readers when it has any."""
    chunk_id = hashlib.sha256(f"{url}\n{index}\n{body}".encode()).hexdigest()[:32]
    metadata: dict[str, Any] = {
        "doc_id": hashlib.sha256(url.encode()).hexdigest(),
        "url": url,
        "title": title,
        "section": section,
        "chunk_index": index,
        "os": "",
    }
    if readers is not None:
        metadata.update(readers.metadata())
    chroma.upsert(
        ids=[chunk_id],
        embeddings=encoder.encode([f"{section}\n\n{body}"]),
        documents=[body],
        metadatas=[metadata],
    )
    return chunk_id


def snapshot_records(texts: list[tuple[str, Readers]]) -> list[_Record]:
    """Records of a retrieval snapshot, one a page (``c0``, ``c1``...), of ``texts`` and who may
    read each, for the tests that build a snapshot without Chroma."""
    return [
        _Record(
            chunk_id=f"c{i}",
            text=text,
            url=f"https://kb.example/{i}",
            title=f"Page {i}",
            section=f"Page {i}",
            chunk_index=0,
            os=frozenset(),
            readers=readers,
        )
        for i, (text, readers) in enumerate(texts)
    ]
