"""The crawler fleet: Playwright workers that read a company's allowed help sites on request.

Protocol (what other services and the CLI rely on)
--------------------------------------------------

Start a job
    Publish :class:`contracts.events.ContextInsufficient` on ``context.insufficient``: the
    correlation and conversation ids of the turn, the (redacted) ``question``, ``seed_urls``,
    ``allowed_domains`` (each also allows its subdomains; ``host:port`` pins a port; empty means
    the seeds' own hosts), the ``budget`` (``max_pages`` published, ``max_depth`` from a seed,
    ``deadline_s`` from the start, ``concurrency`` fleet-wide) and ``job_id`` (choose it to stop
    or follow the job), optionally ``reply_to`` (a gateway reply stream) and ``source``.
    A redelivered request does not start a second job.

What is published
    * ``pages.crawled``: one :class:`~contracts.events.PagesCrawled` per page with the job id and
      the request's correlation id; its single :class:`~contracts.events.CrawledPage` carries the
      URL after redirects, title, the page's HTML as read (its DOM when rendered) or a PDF's bytes
      (base64), links, depth, status, content type, bytes, ms and the content hash. The fleet
      extracts no content: the indexer does, as it does for uploaded files. Its event id is
      derived from job and URL, so a page that is published again after a worker died has the
      same id: consumers de-duplicate on it.
    * ``reply_to`` (when set): ``TurnReply(kind="progress", stage="crawling",
      detail="3/10 pages")`` after every page.
    * ``crawl.finished``: one :class:`~contracts.events.CrawlFinished` per job with the ``reason``
      (``max_pages``, ``deadline``, ``frontier_empty`` or ``stopped``), the pages published (url,
      status, depth, title, bytes, ms), the URLs skipped by cause (``robots``, ``off_domain``,
      ``duplicate``, ``error``, and ``non_html``, ``too_large``, ``blocked``, ``redirects``,
      ``trap``, ``cancelled``, ``deadline`` when they occur), duration and pages per second.
      Its event id is derived from the job id.

Stop a job early
    Publish :class:`~contracts.events.CrawlStop` (``job_id``, ``reason``) on ``crawl.stop``. Pages
    already being fetched finish and are published; nothing new starts; ``crawl.finished`` follows
    with reason ``stopped``.

Inside the fleet
    Every worker (``python -m crawler``) reads ``context.insufficient``, ``crawl.tasks`` and
    ``crawl.stop`` through the ``crawler`` consumer group (:mod:`contracts.bus`: ack after the
    work, reclaim of a dead worker's messages, dead-letter after repeated failure). A job's
    frontier, visited set, budget counters and per-URL states live in Redis
    (:mod:`crawler.jobs` lists the keys); per-host rate limits in :mod:`crawler.ratelimit`;
    robots.txt in :mod:`crawler.robots`; sitemaps in :mod:`crawler.sitemaps` (read when a job
    starts, while its seeds are fetched; their pages are planned as the seeds' links). One
    ``crawl.tasks`` entry is one URL of one job; the fleet keeps at most ``concurrency`` of a
    job's URLs dispatched at once, always the best ones the link planner
    (:mod:`crawler.planner`) has scored so far. ``CRAWLER_NAMESPACE`` prefixes every stream and
    key name, for fleets or test runs that share a Redis.
"""
