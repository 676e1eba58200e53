"""The orchestrator: the agent that turns a redacted question into a grounded, cited reply."""
