"""Serve an ASGI app on a free loopback port inside the running event loop (call, bench, tests)."""

from __future__ import annotations

import asyncio
import socket
from contextlib import asynccontextmanager

import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def serve_app(app, host: str = "127.0.0.1", port: int | None = None):
    """Yields the base URL (``http://127.0.0.1:PORT``) while ``app`` serves; stops it on exit."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the HTTP server stopped before it started")
        await asyncio.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task
