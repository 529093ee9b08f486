"""The AI core's model tables, reached over HTTP with the service credential. The tables live in
the AI core (which reads them on every request, so a change is seen at once); the gateway
only validates, shapes and relays."""
from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from gateway.errors import ApiError, BadGateway

CALL_TIMEOUT = 15.0


class AiCoreClient:
    def __init__(self, context, base_url: str, timeout: float = CALL_TIMEOUT):
        self.context = context
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    async def call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        """The decoded JSON answer; the AI core's own error (404, 400...) is passed on as it is,
        an unreachable AI core becomes 502 `ai_core_unreachable`."""
        url = f"{self.base_url}/api/v1/models{path}"
        try:
            async with self.context.http.request(
                    method, url, json=body, headers=self.context.peer_headers(),
                    timeout=aiohttp.ClientTimeout(total=timeout or self.timeout)) as response:
                try:
                    answer = await response.json(content_type=None)
                except ValueError:
                    answer = None
                status = response.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise BadGateway(f"The AI core cannot be reached: {error.__class__.__name__}",
                             error_type="ai_core_unreachable",
                             hint=f"Check that the ai-core service runs at {self.base_url} (AI_CORE_URL).") from None
        if status >= 400:
            if isinstance(answer, dict) and answer.get("error"):
                raise ApiError(str(answer["error"]), error_type=answer.get("errorType"),
                               hint=answer.get("hint"), status=status if status != 401 else 502)
            raise BadGateway(f"The AI core answered HTTP {status}.", error_type="ai_core_error")
        if answer is None:
            raise BadGateway("The AI core answered something other than JSON.", error_type="ai_core_error")
        return answer

    async def providers(self) -> list[dict]:
        return (await self.call("GET", "/providers"))["providers"]

    async def models(self) -> list[dict]:
        return (await self.call("GET", "/models"))["models"]

    async def routes(self) -> list[dict]:
        return await self.call("GET", "/routing")

    async def probe(self, provider: str, *, url: str | None = None, method: str = "GET",
                    payload: dict | None = None, timeout: float) -> dict:
        body: dict[str, Any] = {"method": method, "timeout": timeout}
        if url is not None:
            body["url"] = url
        if payload is not None:
            body["json"] = payload
        return await self.call("POST", f"/providers/{provider}/probe", body, timeout=timeout + 5)
