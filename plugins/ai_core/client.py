"""The one client of the AI core, for the services that call it (the gateway): the `AI_CORE`
contract (contract.py) over the core's peer transport (gateway/peers.py) — the streaming chat
call, image descriptions and the model tables, with the service credential.

One error: every failure is an `AiCoreError`, a `PeerFailed`. One timeout policy: `[peers]
connect_timeout` to connect, then a read timeout per kind of call from
`[plugins.ai_core_client]`."""
from __future__ import annotations

from typing import Any, AsyncGenerator, cast

from gateway.peers import PeerClient, PeerContext, PeerFailed, PeerTimeout

from .contract import AiCoreError, ChatEvent, ChatRequest, ImageDescription, StreamStop
from .settings import AiCoreClientSettings

# The AI core takes a probe's own time limit to answer; the read waits a little longer.
PROBE_MARGIN = 5.0
STREAM_PATH = "/api/v1/chat/stream"


class AiCoreClient(PeerClient):
    def __init__(self, context: PeerContext, settings: AiCoreClientSettings) -> None:
        super().__init__(context, "ai_core", service="AI core", unreachable=AiCoreError,
                         timeout=PeerTimeout.from_config(context.config, read=settings.admin_timeout))
        self.chat_read_timeout = settings.chat_read_timeout
        self.vision_timeout = PeerTimeout.from_config(context.config, read=settings.vision_timeout)

    def not_reached(self, error: BaseException) -> PeerFailed:
        detail = str(error)
        return self.unreachable(f"the AI core cannot be reached or stopped answering ({error.__class__.__name__}"
                                f"{': ' + detail if detail else ''})")

    # ------------------------------------------------------------ the streaming chat call

    def stream_chat(self, body: ChatRequest, stop: StreamStop | None = None) -> AsyncGenerator[ChatEvent, None]:
        """The AI core's events, as the transport reads them (no generator of its own between:
        this runs per delta of every reply). `chat_read_timeout` bounds each silence: until the
        answer starts, then between two reads of its body. `stop` ends the read at once and
        closes the connection, which the AI core sees and stops the model."""
        return self.events(STREAM_PATH, body, silence=self.chat_read_timeout,  # type: ignore[return-value]
                           on_stop=stop.on_request if stop is not None else None)

    # ------------------------------------------------------------ images

    async def describe_image(self, image: str, *, prompt: str, user_id: str | None = None) -> ImageDescription:
        answer = await self.ask("POST", "/api/v1/vision/describe",
                                {"image": image, "prompt": prompt, "user_id": user_id}, self.vision_timeout)
        if not isinstance(answer, dict) or not isinstance(answer.get("description"), str):
            raise AiCoreError("the AI core's description has no text")
        return {"description": answer["description"], "model": str(answer.get("model") or "")}

    # ------------------------------------------------------------ the model tables

    async def providers(self) -> list[dict]:
        return cast("list[dict]", (await self.call_models("GET", "/providers"))["providers"])

    async def save_provider(self, name: str, base_url: str, api_key: str | None = None) -> None:
        body = {"name": name, "base_url": base_url}
        if api_key is not None:
            body["api_key"] = api_key
        await self.call_models("POST", f"/providers/{name}", body)

    async def delete_provider(self, name: str) -> None:
        await self.call_models("DELETE", f"/providers/{name}")

    async def models(self) -> list[dict]:
        return cast("list[dict]", (await self.call_models("GET", "/models"))["models"])

    async def save_model(self, model_id: str, fields: dict) -> None:
        await self.call_models("POST", f"/models/{model_id}", {**fields, "id": model_id})

    async def delete_model(self, model_id: str) -> None:
        await self.call_models("DELETE", f"/models/{model_id}")

    async def routes(self) -> list[dict]:
        return cast("list[dict]", await self.call_models("GET", "/routing"))

    async def save_route(self, purpose: str, fallback_chain: list[str], required: bool) -> None:
        await self.call_models("POST", f"/routing/{purpose}", {"fallback_chain": fallback_chain, "required": required})

    async def delete_route(self, purpose: str) -> None:
        await self.call_models("DELETE", f"/routing/{purpose}")

    async def probe(self, provider: str, *, url: str | None = None, method: str = "GET",
                    payload: dict | None = None, timeout: float) -> dict:
        body: dict[str, Any] = {"method": method, "timeout": timeout}
        if url is not None:
            body["url"] = url
        if payload is not None:
            body["json"] = payload
        return cast(dict, await self.call_models(
            "POST", f"/providers/{provider}/probe", body,
            PeerTimeout.from_config(self.context.config, read=timeout + PROBE_MARGIN)))

    async def call_models(self, method: str, path: str, body: Any = None, timeout: PeerTimeout | None = None) -> Any:
        return await self.ask(method, "/api/v1/models" + path, body, timeout)

    # ------------------------------------------------------------ one JSON call

    async def ask(self, method: str, path: str, body: Any, timeout: PeerTimeout | None = None) -> Any:
        """The AI core's decoded JSON answer (an object or a list); its error answer raised as
        it said it."""
        answer = await self.request(method, path, json_body=body, timeout=timeout)
        if answer.status >= 400:
            raise self.refusal(answer)
        try:
            return answer.decoded()
        except ValueError:
            raise AiCoreError("the AI core answered something other than JSON") from None
