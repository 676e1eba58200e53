"""Where indexing's time goes, and how fast it could be: a corpus extracted, chunked with each way
of placing boundaries, and its chunks embedded, each step timed on its own.

Run ``python -m indexer.tests.bench_embed --corpus DIR`` from the repository root (e.g. the GNOME
help under ``../shared/data/kb/gnome-help``). Nothing is stored: the steps are the indexer's own
(:func:`indexer.extract.extract_document`, :class:`indexer.chunking.SemanticChunker` over ten
documents a call, as an ingest batch, and :class:`indexer.embedding.Embedder` with the service's
default batch size), timed in one process:

1. **extract**: every file read and extracted;
2. **chunk**, once per boundary measure (``semantic``: every sentence of a section long enough to
   be cut goes through the model; ``static``: the model's word-piece table, no forward pass), of
   which **boundaries** is the part spent measuring where the topic changes;
3. **embed**: the chunks' texts (section path, lead and body) through the model, as the indexer
   stores them: chunks per second of the model alone, the ceiling of any indexing pipeline with
   this model on this machine, since every chunk must be embedded once.

It prints word pieces per chunk text and per sentence, since the model's time grows with them,
and the machine's cores and load average (figures on a shared machine are upper bounds).
Not collected by pytest; ``indexer/tests/test_bench_embed.py`` runs it on three small files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from indexer.chunking import ChunkingConfig, SemanticChunker
from indexer.embedding import Embedder
from indexer.extract import ExtractedDocument, extract_document

BATCH = 10
"""Documents a ``chunk_many`` call, as an ingest batch hands them over."""


class TimedEmbedder(Embedder):
    """The packaged model, counting the texts it embeds and the time it takes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.texts = 0
        self.seconds = 0.0

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        start = time.perf_counter()
        try:
            return super().encode(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.texts += len(texts)


def extract_corpus(corpus: Path) -> list[ExtractedDocument]:
    """Every file under ``corpus`` the indexer can extract, in path order."""
    docs = []
    for path in sorted(p for p in corpus.rglob("*") if p.is_file()):
        try:
            doc = extract_document(path)
        except (ValueError, OSError):
            continue
        if doc is not None and doc.sections:
            docs.append(doc)
    return docs


def measure(corpus: Path, *, torch_threads: int | None = None) -> dict[str, Any]:
    """The figures of one run over ``corpus``."""
    embedder = TimedEmbedder(torch_threads=torch_threads).load()
    started = time.perf_counter()
    docs = extract_corpus(corpus)
    figures: dict[str, Any] = {
        "documents": len(docs),
        "extract_s": round(time.perf_counter() - started, 2),
    }
    texts: list[str] = []
    for boundaries in ("semantic", "static"):
        chunker = SemanticChunker(embedder, ChunkingConfig(boundaries=boundaries))  # type: ignore[arg-type]
        chunker.chunk_many(docs[:1])  # spaCy's sentence recogniser loads once, not timed
        embedder.texts, embedder.seconds = 0, 0.0
        started = time.perf_counter()
        chunks = [
            chunk
            for i in range(0, len(docs), BATCH)
            for doc_chunks in chunker.chunk_many(docs[i : i + BATCH])
            for chunk in doc_chunks
        ]
        figures[boundaries] = {
            "chunks": len(chunks),
            "chunk_s": round(time.perf_counter() - started, 2),
            "boundaries_s": round(embedder.seconds, 2),
            "sentences_embedded": embedder.texts,
        }
        if boundaries == "semantic":
            texts = [chunk.text for chunk in chunks]
    embedder.texts, embedder.seconds = 0, 0.0
    embedder.encode(texts)
    figures["embed_s"] = round(embedder.seconds, 2)
    figures["model_chunks_per_s"] = round(len(texts) / embedder.seconds, 1) if texts else 0.0
    tokens = embedder.count_tokens(texts)
    figures["word_pieces_per_chunk"] = round(statistics.mean(tokens), 1) if tokens else 0.0
    for boundaries in ("semantic", "static"):
        run = figures[boundaries]
        total = figures["extract_s"] + run["chunk_s"] + figures["embed_s"]
        run["pipeline_chunks_per_s"] = round(run["chunks"] / total, 1) if total else 0.0
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--torch-threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    figures = measure(args.corpus, torch_threads=args.torch_threads)
    figures["cores"] = os.cpu_count()
    figures["load_average"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
    if args.json:
        print(json.dumps(figures, sort_keys=True))
        return 0
    print(
        f"{figures['documents']} documents extracted in {figures['extract_s']} s; "
        f"{figures['cores']} cores, load average {figures['load_average'][0]} -> "
        f"{figures['load_average'][1]}"
    )
    for boundaries in ("semantic", "static"):
        run = figures[boundaries]
        print(
            f"{boundaries:>8}: {run['chunks']} chunks in {run['chunk_s']} s, of which "
            f"boundaries {run['boundaries_s']} s ({run['sentences_embedded']} sentences "
            f"through the model); extract + chunk + embed: {run['pipeline_chunks_per_s']} chunks/s"
        )
    print(
        f"   model: {figures['word_pieces_per_chunk']} word pieces a chunk text, embedded in "
        f"{figures['embed_s']} s: {figures['model_chunks_per_s']} chunks/s (the ceiling)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
