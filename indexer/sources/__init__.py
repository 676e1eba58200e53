"""Knowledge sources the indexer syncs incrementally: Confluence spaces (and, later, SharePoint).

One module per part: :mod:`~indexer.sources.base` (what a source plugin implements),
:mod:`~indexer.sources.config` (their settings), :mod:`~indexer.sources.state` (cursors and
each document's version, in Redis), :mod:`~indexer.sources.sync` (one run: new, changed,
unchanged, deleted) and one module per source system.
"""
