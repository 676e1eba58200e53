"""The Slack channel: Events API (mentions, direct messages), the ``/it`` slash command and the
answers' buttons (interactivity), all verified with the app's signing secret."""
