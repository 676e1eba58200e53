"""One extraction path: a page the crawler fleet reads, served, rendered or a PDF, comes out of
the indexer with the same sections, numbered steps, code and tables as the same file uploaded.

The crawler runs for real (an in-process worker on valkey, the system Chromium, a loopback site);
its published events go through the indexer's :func:`~indexer.crawled.page_document`, the
uploads through :func:`~indexer.extract.extract_bytes`, as the upload handler calls it.
"""

from __future__ import annotations

import json

from crawler.tests import conftest as crawler_fixtures
from crawler.tests.conftest import CrawlClient, RunCrawler, needs_chromium
from crawler.tests.siteserver import Reply, SiteServer
from indexer.crawled import page_document
from indexer.extract import ExtractedDocument, extract_bytes
from tests.support.help_documents import GUIDE_CHROME, GUIDE_HTML, MANUAL_PDF

pytestmark = needs_chromium

# The crawler's own test fixtures: a worker on a namespace of this test's, and a client.
crawler_settings = crawler_fixtures.crawler_settings
redis = crawler_fixtures.redis
client = crawler_fixtures.client
shared_chromium = crawler_fixtures.shared_chromium
run_crawler = crawler_fixtures.run_crawler

UPLOAD_URL = "upload://0123456789abcdef0123456789abcdef/file"


def structure(doc: ExtractedDocument) -> list[tuple[tuple[str, ...], str, str]]:
    return [(s.path, b.kind, b.text) for s in doc.sections for b in s.blocks]


def rendered_guide() -> str:
    """The guide as a script-built page: the served HTML has only the head and "Loading"."""
    head, body = GUIDE_HTML.split("<body>")
    content = body.split("</body>")[0]
    script = (
        "<script>document.addEventListener('DOMContentLoaded', () => {"
        f"document.body.innerHTML = {json.dumps(content)};}});</script>"
    )
    return f"{head.replace('</head>', script + '</head>')}<body><p>Loading...</p></body></html>"


async def test_crawled_pages_and_pdfs_have_the_sections_of_the_same_files_uploaded(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as site:
        site.page("/guide.html", GUIDE_HTML)
        site.page("/app/guide", rendered_guide())
        site.route("/manual.pdf", Reply(body=MANUAL_PDF, content_type="application/pdf"))
        async with run_crawler():
            # Two jobs: within one, the built page would be a duplicate of the served one.
            first = await client.start([site.url("/guide.html"), site.url("/manual.pdf")])
            second = await client.start([site.url("/app/guide")])
            for request in (first, second):
                assert (await client.finished(request)).reason == "frontier_empty"
            pages = await client.pages(first) | await client.pages(second)

    served, built, manual = (
        pages[site.url(path)] for path in ("/guide.html", "/app/guide", "/manual.pdf")
    )
    assert not served.rendered
    assert built.rendered
    assert "Loading..." not in built.html

    uploaded_guide = extract_bytes(GUIDE_HTML.encode(), "guide.html", UPLOAD_URL)
    for page in (served, built):
        doc = page_document(page)
        assert doc is not None, page.url
        assert structure(doc) == structure(uploaded_guide), page.url
        assert doc.url == page.url
        assert {kind for _, kind, _ in structure(doc)} == {"paragraph", "step", "code", "table"}
        for chrome in GUIDE_CHROME:
            assert chrome not in doc.text

    uploaded_manual = extract_bytes(MANUAL_PDF, "manual.pdf", UPLOAD_URL)
    crawled_manual = page_document(manual)
    assert crawled_manual is not None
    assert structure(crawled_manual) == structure(uploaded_manual)
    assert crawled_manual.title == uploaded_manual.title == "Quasar-7 badge printer"
    assert [s.path[-1] for s in crawled_manual.sections] == [
        "Badge printer manual",
        "Reset the printer",
        "Order supplies",
    ]
    assert [kind for _, kind, _ in structure(crawled_manual)].count("step") == 2
