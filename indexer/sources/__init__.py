"""Knowledge sources the indexer syncs incrementally: Confluence spaces and SharePoint sites (their
pages, configured lists and document libraries).

One module per part: :mod:`~indexer.sources.base` (what a source plugin implements),
:mod:`~indexer.sources.config` (their settings), :mod:`~indexer.sources.state` (cursors and
each document's version, in Redis), :mod:`~indexer.sources.sync` (one run: new, changed,
unchanged, deleted) and one module per source system (SharePoint's pages and list items as
documents in :mod:`~indexer.sources.sharepoint_pages`).
"""
