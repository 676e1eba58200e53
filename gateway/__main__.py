"""``python -m gateway``: serve the chat page and API with uvicorn.

Exits non-zero if the server stops on its own, so a supervisor restarts it.
"""

import sys

from contracts.logs import configure_logging, enable_stack_dumps


def main() -> int:
    import uvicorn

    from gateway.app import create_app
    from gateway.config import GatewaySettings

    settings = GatewaySettings()
    configure_logging("gateway", settings.node_name, settings.log_level)
    enable_stack_dumps()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            log_config=None,
            timeout_graceful_shutdown=int(settings.graceful_timeout_s),
            ws_max_size=max(65536, settings.max_message_bytes * 4),
        )
    )
    server.run()
    return 0 if server.should_exit else 1


if __name__ == "__main__":
    sys.exit(main())
