"""The indexer service: turns documents, crawled pages and resolved tickets into searchable chunks.

Extraction (:mod:`indexer.extract`) → section-aware chunking (:mod:`indexer.chunking`) → embeddings
with the packaged MiniLM model (:mod:`indexer.embedding`) → Chroma (:mod:`indexer.store`). The
orchestration of those steps, with idempotent re-ingestion, lives in :mod:`indexer.service`; the
message-bus edges (``app.py``, ``handlers.py``) only translate events into calls to it.
"""
