"""The worker's cache of the scripts and stylesheets rendered pages load."""

from __future__ import annotations

import asyncio

import pytest

from crawler.browser import Fulfilment, SubRequest
from crawler.subresources import SubresourceCache


def request(url: str = "https://docs.example/app.js", kind: str = "script", method: str = "GET"):
    return SubRequest(url, method, {}, None, kind)


def answer(body: bytes = b"x" * 100, status: int = 200, **headers: str) -> Fulfilment:
    return Fulfilment(status, dict(headers), body)


def test_a_script_is_served_from_memory_the_second_time() -> None:
    cache = SubresourceCache(max_bytes=10_000, ttl_s=60)
    assert cache.get(request()) is None
    cache.put(request(), answer(), redirected=False)

    assert cache.get(request()) == answer()
    assert cache.hits == 1


@pytest.mark.parametrize(
    ("sub", "reply", "redirected"),
    [
        (request(kind="fetch"), answer(), False),  # data a script asked for
        (request(kind="document"), answer(), False),
        (request(method="POST"), answer(), False),
        (request(), answer(status=404), False),
        (request(), answer(**{"cache-control": "no-store"}), False),
        (request(), answer(**{"cache-control": "private, max-age=60"}), False),
        (request(), answer(), True),  # the hops were judged for the job that fetched it
        (request(), answer(**{"set-cookie": "session=abc; Path=/"}), False),
    ],
    ids=["fetch", "document", "post", "404", "no-store", "private", "redirected", "cookie"],
)
def test_only_what_any_page_may_be_served_is_kept(
    sub: SubRequest, reply: Fulfilment, redirected: bool
) -> None:
    cache = SubresourceCache(max_bytes=10_000, ttl_s=60)
    cache.put(sub, reply, redirected=redirected)
    assert cache.get(sub) is None
    assert cache.bytes == 0


def test_entries_expire_and_the_least_recently_used_go_first() -> None:
    cache = SubresourceCache(max_bytes=400, ttl_s=60)
    a, b, c, d, e = (request(f"https://docs.example/{n}.js") for n in "abcde")
    for sub in (a, b, c, d):
        cache.put(sub, answer(), redirected=False)
    assert cache.get(a) is not None  # a is now the more recently used
    cache.put(e, answer(), redirected=False)  # over 400 bytes: b, the least recent, goes

    assert cache.get(b) is None
    for kept in (a, c, d, e):
        assert cache.get(kept) is not None
    assert cache.bytes == 400


def test_a_body_over_a_quarter_of_the_budget_is_not_kept() -> None:
    cache = SubresourceCache(max_bytes=400, ttl_s=60)
    cache.put(request(), answer(b"x" * 101), redirected=False)
    assert cache.get(request()) is None


def test_with_no_time_to_live_nothing_is_served() -> None:
    cache = SubresourceCache(max_bytes=400, ttl_s=0)
    cache.put(request(), answer(), redirected=False)
    assert cache.get(request()) is None
    assert cache.bytes == 0


async def test_pages_asking_at_once_share_one_download() -> None:
    cache = SubresourceCache(max_bytes=10_000, ttl_s=60)
    downloads = 0
    release = asyncio.Event()

    async def download() -> tuple[Fulfilment, bool]:
        nonlocal downloads
        downloads += 1
        await release.wait()
        return answer(), False

    pages = [asyncio.create_task(cache.fetch(request(), download)) for _ in range(3)]
    await asyncio.sleep(0)
    release.set()

    assert await asyncio.gather(*pages) == [answer()] * 3
    assert downloads == 1


async def test_when_the_shared_download_fails_the_others_fetch_for_themselves() -> None:
    cache = SubresourceCache(max_bytes=10_000, ttl_s=60)
    attempts = 0
    release = asyncio.Event()

    async def download() -> tuple[Fulfilment, bool]:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await release.wait()
            raise ConnectionError("the first page's download failed")
        return answer(), False

    first = asyncio.create_task(cache.fetch(request(), download))
    await asyncio.sleep(0)
    second = asyncio.create_task(cache.fetch(request(), download))
    await asyncio.sleep(0)
    release.set()

    with pytest.raises(ConnectionError):
        await first
    assert await second == answer()
    assert attempts == 2
