"""The redactor service: strips personal and secret data from user text before anyone sees it.

Raw chat messages and extracted attachment text come in; text with placeholders such as
``<PERSON_1>`` or ``<PASSWORD_1>`` goes out. Every downstream service (orchestrator, indexer,
ticketing, the LLM) only ever receives redacted text, so this is the one place where the
privacy rules of ARCHITECTURE.md ("Data that must never leak") are enforced.

The detection logic lives in :mod:`redactor.service` and :mod:`redactor.recognizers` and never
touches the message bus; the bus wiring lives beside it in the service's edge modules.
"""
