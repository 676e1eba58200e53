"""A loopback TCP proxy in front of a Redis-protocol server that answers the first PINGs late.

It stands for a server (or a client process) so loaded that a connection's first round trip
takes seconds: FastStream's stream subscribers wait a fixed 3 s for their first PING when the
broker starts (``LogicSubscriber.start``), and :meth:`contracts.bus.Bus.start` must survive
that wait running out.

Only PING is slowed, and only on connections of the client named ``client`` (the name redis-py
announces when it connects, ``CLIENT SETINFO LIB-NAME``; FastStream's pool announces itself as
``faststream``). A delay on a connection's first reply would land on the subscriber's group
creation, which FastStream does not time, and a process's other clients PING too (redis-py's
health check), outside any wait. Everything else passes through untouched, byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

PING = b"*1\r\n$4\r\nPING\r\n"
"""A PING without argument as a client sends it (RESP array of one bulk string)."""

CHUNK = 65536


class SlowPingProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream``; the answers to the first ``slow_pings``
    PINGs that connections of ``client`` send reach them ``delay_s`` late. Use as
    ``async with``."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        client: bytes,
        delay_s: float,
        slow_pings: int,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.client = client
        self.delay_s = delay_s
        self._slow_left = slow_pings
        self.delayed = 0
        """How many answers were held back so far."""
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._handlers: set[asyncio.Task[None] | None] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "the proxy is not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def __aenter__(self) -> SlowPingProxy:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._pipes):
            task.cancel()
        # The connections' handlers end on their own once their pipes are gone (cancelling them
        # would make asyncio log their cancellation as an error).
        await asyncio.gather(*(task for task in self._handlers if task), return_exceptions=True)
        await self._server.wait_closed()

    async def _connected(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        handler = asyncio.current_task()
        self._handlers.add(handler)
        try:
            await self._forward(client_in, client_out)
        finally:
            self._handlers.discard(handler)

    async def _forward(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        try:
            server_in, server_out = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_out.close()
            return
        held = asyncio.Event()  # set while the answer to a slowed PING is due
        tasks = (
            asyncio.create_task(self._requests(client_in, server_out, held)),
            asyncio.create_task(self._answers(server_in, client_out, held)),
        )
        self._pipes.update(tasks)
        try:
            # Either side closing ends the connection, as a real server's would.
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._pipes.difference_update(tasks)
            for writer in (server_out, client_out):
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

    async def _requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, held: asyncio.Event
    ) -> None:
        named = False
        while chunk := await reader.read(CHUNK):
            named = named or self.client in chunk
            if named and self._slow_left and PING in chunk:
                self._slow_left -= 1
                held.set()  # before the PING leaves: its answer cannot overtake the flag
            writer.write(chunk)
            await writer.drain()

    async def _answers(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, held: asyncio.Event
    ) -> None:
        while chunk := await reader.read(CHUNK):
            if held.is_set():
                held.clear()
                self.delayed += 1
                await asyncio.sleep(self.delay_s)
            writer.write(chunk)
            await writer.drain()
