"""Deskpilot as a Model Context Protocol server (the official ``mcp`` SDK, streamable HTTP)."""
