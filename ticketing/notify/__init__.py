"""Telling the people responsible for a category about questions the assistant could not answer,
or answered with low confidence (``notice.unanswered``): by e-mail and by Slack incoming webhook.

:mod:`~ticketing.notify.config` (who is told, per category; the SMTP server),
:mod:`~ticketing.notify.service` (which notices go out: configured categories, one per recurring
question per window, a cap per hour; the message), :mod:`~ticketing.notify.email` and
:mod:`~ticketing.notify.slack` (one channel each).

The ticketing service sends them because it is already the one that talks to the help desk's
outside systems (Jira, the status page) with their credentials and retries; the orchestrator
only says a turn went unanswered, and no other service holds an SMTP password or a webhook URL.
"""
