"""The Microsoft Teams channel: Bot Framework activities in (their JWT verified), replies through
the Bot Connector API (an Adaptive Card answer, a typing indicator while the turn runs)."""
