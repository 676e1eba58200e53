"""Who may read a document, as filed on its chunks and compared by a sync."""

from __future__ import annotations

import pytest

from contracts.readers import Readers


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (Readers(public=False, groups=("hr", "it")), Readers(public=False, groups=("hr,it",))),
        (
            Readers(public=False, users=("a;",), groups=("b",)),
            Readers(public=False, users=("a",), groups=(";b",)),
        ),
        (Readers(public=False, users=("x",)), Readers(public=False, groups=("x",))),
        (Readers(public=True), Readers(public=False)),
    ],
)
def test_different_readers_never_share_a_fingerprint(one: Readers, other: Readers) -> None:
    # A sync rewrites a document's chunks when its readers' fingerprint changes: a revoked
    # group that shared a fingerprint with the old list would stay on the chunks.
    assert one.fingerprint() != other.fingerprint()


def test_the_fingerprint_ignores_order_and_repeats() -> None:
    assert (
        Readers(public=False, groups=("b", "a", "a")).fingerprint()
        == Readers(public=False, groups=("a", "b")).fingerprint()
    )
