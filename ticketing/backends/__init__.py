"""Ticket backends: the plugin interface and its two plugins, chosen by ``TICKETING_BACKEND``."""

from __future__ import annotations

from ticketing.backends.base import TicketBackend
from ticketing.config import TicketingSettings


def build_backend(settings: TicketingSettings) -> TicketBackend:
    """The backend the settings select (imports the Jira client only when it is used)."""
    if settings.backend == "jira":
        from ticketing.backends.jira import JiraBackend

        return JiraBackend(settings.jira_config())
    from ticketing.backends.local import LocalBackend

    return LocalBackend(settings.local_config())
