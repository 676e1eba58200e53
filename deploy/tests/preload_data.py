"""Data a stand-in service reads once, for the fork server's tests of warmed loaders."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def table() -> dict[str, int]:
    """Stands for a table a service reads once from an installed package."""
    return {"rows": 1}
