"""Redis going away mid-request (restart, AOF still loading) is a 503 the client may retry."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from redis.exceptions import BusyLoadingError, ConnectionError

from gateway.errors import install_error_handlers


def test_redis_errors_become_503_with_retry_after() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/refused")
    async def refused() -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    @app.get("/loading")
    async def loading() -> None:
        raise BusyLoadingError("Redis is loading the dataset in memory")

    client = TestClient(app, raise_server_exceptions=False)
    for path, kind in (("/refused", "ConnectionError"), ("/loading", "BusyLoadingError")):
        response = client.get(path)
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert response.json() == {
            "error_code": "bus_unavailable",
            "detail": f"the message bus is unavailable ({kind})",
        }
