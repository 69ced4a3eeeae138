"""The server's socket (orchestrator/serve/server.py: listen): a TCP socket asyncio sets
TCP_NODELAY on for each connection it accepts. With protocol 0 it does not, and a response's
body, written after its headers, waits for the client's delayed ACK: about 40 ms a request."""

from __future__ import annotations

import asyncio
import socket

from duckscore.serve.server import listen


def test_accepted_connections_send_without_delay() -> None:
    async def main() -> int:
        sock = listen("127.0.0.1", 0)
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            accepted.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connection, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            flag = await asyncio.wait_for(accepted, 10)
            writer.close()
        return flag

    assert asyncio.run(main()) != 0
