"""The gateway: the only public entry point (web chat, WebSocket, REST API)."""
