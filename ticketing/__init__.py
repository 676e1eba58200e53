"""The ticketing service: hands conversations over to technicians as tickets.

Escalations from the orchestrator become tickets in Jira or the embedded local store (one per
idempotency key; a comment on the user's open ticket of the same topic instead of a duplicate),
kept in Redis and retried when the ticket system is down, with the user told a ticket will
follow. Incidents (from the API, any internal system, or the status-page watcher) are kept and
linked to the open tickets they explain. Everything received is already redacted.

The logic lives in :mod:`ticketing.service`, :mod:`ticketing.incidents` and
:mod:`ticketing.content` and never touches the bus; backends are plugins
(:mod:`ticketing.backends`).
"""
