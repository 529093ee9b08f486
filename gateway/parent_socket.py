"""A worker's calls to its parent process (`gateway serve --workers N`) over the owner-only unix
socket on which the parent serves what one process must hold for all of them: the embedded
vector store (gateway/shared_vectors.py) and the offline embedding model
(gateway/shared_embeddings.py). One client, so that both read the parent's answers alike."""
from __future__ import annotations

import asyncio
from typing import Any, Mapping

import aiohttp
import orjson


class ParentUnreachable(Exception):
    """The parent did not answer, or answered something that is not JSON."""


class ParentSocket:
    def __init__(self, socket_path: str, host: str, timeout: aiohttp.ClientTimeout):
        self.socket_path, self.host, self.timeout = socket_path, host, timeout
        self._http: aiohttp.ClientSession | None = None

    async def post(self, path: str, arguments: Mapping[str, object]) -> tuple[int, Any]:
        """The parent's status and its JSON body."""
        if self._http is None:
            self._http = aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=self.socket_path),
                                               timeout=self.timeout)
        try:
            async with self._http.post(f"http://{self.host}/{path}", data=orjson.dumps(dict(arguments)),
                                       headers={"Content-Type": "application/json"}) as answer:
                return answer.status, orjson.loads(await answer.read())
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as error:
            raise ParentUnreachable(repr(error)) from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
