"""The model providers' calls under the egress policy: a provider on a link-local, metadata or
loopback address that the operator did not allow is never connected to (a loopback listener
records every connection to prove it), the turn falls back cleanly with the kind `refused`, and
what the operator allowed (`[fetch] model_hosts`, the endpoint of `OPENAI_BASE_URL`) works."""
from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver

from gateway.fetch import RESOLVER
from gateway.plugins import Plugin
from tests.ai_core.conftest import SERVICE, configure, read_events, text_of


class ConnectionRecorder:
    """A loopback listener that only counts the connections made to it."""

    def __init__(self):
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> "ConnectionRecorder":
        async def accepted(reader, writer):
            self.connections += 1
            writer.close()

        self.server = await asyncio.start_server(accepted, "127.0.0.1", 0)
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    def close(self) -> None:
        assert self.server is not None
        self.server.close()


@pytest.fixture
async def recorder():
    listener = await ConnectionRecorder().start()
    yield listener
    listener.close()


class TableResolver(AbstractResolver):
    """A DNS server under someone else's control: public-looking names that answer inner addresses."""

    TABLE = {"llm.example": "127.0.0.1", "meta.example": "169.254.169.254"}

    def __init__(self):
        self.asked: list[str] = []

    async def resolve(self, host, port=0, family=socket.AF_INET):
        self.asked.append(host)
        if host not in self.TABLE:
            raise OSError(f"unknown host {host}")
        return [{"hostname": host, "host": self.TABLE[host], "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST}]

    async def close(self):
        pass


class Dns(Plugin):
    name = "test_dns"

    def __init__(self):
        self.resolver = TableResolver()

    def setup(self, registrar):
        registrar.provide(RESOLVER, self.resolver)


async def add_model(client, model_id: str, base_url: str, chain: list[str] | None = None,
                    required: bool = False) -> None:
    response = await client.post(f"/api/v1/models/providers/p-{model_id}", headers=SERVICE,
                                 json={"base_url": base_url, "api_key": "sk-secret"})
    assert response.status == 200, await response.text()
    response = await client.post(f"/api/v1/models/models/{model_id}", headers=SERVICE,
                                 json={"name": model_id, "provider": f"p-{model_id}", "tags": ["chat"]})
    assert response.status == 200, await response.text()
    if chain is not None:
        response = await client.post("/api/v1/models/routing/chat", headers=SERVICE,
                                     json={"fallback_chain": chain, "required": required})
        assert response.status == 200, await response.text()


async def chat(client, text: str = "what time is it") -> list[dict]:
    return await read_events(await client.post("/api/v1/chat/stream", headers=SERVICE,
                                                json={"user_id": "user_alice", "text": text}))


NOT_ALLOWED = {"fetch.model_hosts": [], "fetch.allow_hosts": [], "fetch.allow_private": False}


async def test_providers_the_policy_refuses_are_never_connected_to(make_ai_core, recorder):
    ai_core = await make_ai_core(overrides=NOT_ALLOWED)
    await add_model(ai_core, "metadata", "http://169.254.169.254/v1")
    await add_model(ai_core, "loopback", f"http://127.0.0.1:{recorder.port}/v1")
    await add_model(ai_core, "by-name", f"http://localhost:{recorder.port}/v1",
                    chain=["metadata", "loopback", "by-name"])
    events = await chat(ai_core)
    done = events[-1]
    assert done["type"] == "done" and done["model"] == "offline-agent"
    assert [(f["model"], f["kind"]) for f in done["fallbacks"]] == [
        ("metadata", "refused"), ("loopback", "refused"), ("by-name", "refused")]
    assert "169.254.169.254" in done["fallbacks"][0]["error"]
    assert "[fetch] model_hosts" in done["fallbacks"][1]["error"]
    notice = next(e for e in events if e["type"] == "system_info")
    assert notice["level"] == "warning" and notice["action"] == "configure_model"
    assert "egress policy" in notice["message"]
    assert recorder.connections == 0


async def test_a_required_route_of_refused_providers_ends_in_a_clear_error(make_ai_core, recorder):
    ai_core = await make_ai_core(overrides=NOT_ALLOWED)
    await add_model(ai_core, "loopback", f"http://127.0.0.1:{recorder.port}/v1", chain=["loopback"], required=True)
    events = await chat(ai_core)
    assert [e["type"] for e in events] == ["error"]
    assert events[0]["errorType"] == "all_models_failed" and "loopback (refused)" in events[0]["error"]
    assert recorder.connections == 0


async def test_the_resolved_address_is_what_is_checked(make_ai_core, recorder):
    """The names look public; what they resolve to, in the connector itself, decides."""
    dns = Dns()
    ai_core = await make_ai_core(dns, overrides=NOT_ALLOWED)
    await add_model(ai_core, "inner", f"http://llm.example:{recorder.port}/v1")
    await add_model(ai_core, "meta", "http://meta.example/v1", chain=["inner", "meta"])
    done = (await chat(ai_core))[-1]
    assert [(f["model"], f["kind"]) for f in done["fallbacks"]] == [("inner", "refused"), ("meta", "refused")]
    assert dns.resolver.asked == ["llm.example", "meta.example"]
    assert "127.0.0.1" in done["fallbacks"][0]["error"]
    assert recorder.connections == 0
    # Private addresses allowed: loopback is reached, the metadata address still never is.
    opened = await make_ai_core(Dns(), overrides={**NOT_ALLOWED, "fetch.allow_private": True})
    await add_model(opened, "inner", f"http://llm.example:{recorder.port}/v1")
    await add_model(opened, "meta", "http://meta.example/v1", chain=["inner", "meta"])
    done = (await chat(opened))[-1]
    assert [(f["model"], f["kind"]) for f in done["fallbacks"]] == [("inner", "connection"), ("meta", "refused")]
    assert recorder.connections >= 1


async def test_a_redirect_to_an_address_not_allowed_is_refused(make_ai_core, aiohttp_server, recorder):
    async def moved(request):
        raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{recorder.port}/v1/chat/completions")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", moved)
    server = await aiohttp_server(app)
    ai_core = await make_ai_core(overrides={**NOT_ALLOWED, "fetch.model_hosts": [f"127.0.0.1:{server.port}"]})
    await add_model(ai_core, "moving", f"http://127.0.0.1:{server.port}/v1", chain=["moving"])
    done = (await chat(ai_core))[-1]
    assert [(f["model"], f["kind"]) for f in done["fallbacks"]] == [("moving", "refused")]
    assert recorder.connections == 0


async def test_what_the_operator_allowed_is_reached(make_ai_core, provider, recorder):
    # Exactly one endpoint: the fake provider's port, not every loopback port.
    ai_core = await make_ai_core(overrides={**NOT_ALLOWED, "fetch.model_hosts": [f"127.0.0.1:{provider.port}"]})
    await configure(ai_core, provider, {"local": "ok"})
    await add_model(ai_core, "elsewhere", f"http://127.0.0.1:{recorder.port}/v1", chain=["elsewhere", "local"])
    events = await chat(ai_core, text="hello")
    assert events[-1]["model"] == "local" and text_of(events) == "Hello from upstream-local."
    assert events[-1]["fallbacks"][0]["kind"] == "refused"
    assert recorder.connections == 0
    # Allowed, the recorder is really connected to (so its zero above means something).
    allowed = await make_ai_core(overrides={**NOT_ALLOWED, "fetch.model_hosts": ["127.0.0.0/8"]})
    await add_model(allowed, "recorded", f"http://127.0.0.1:{recorder.port}/v1", chain=["recorded"])
    assert (await chat(allowed))[-1]["fallbacks"][0]["kind"] == "connection"
    assert recorder.connections >= 1


async def test_the_operators_own_openai_base_url_on_loopback_is_allowed(make_ai_core, provider):
    ai_core = await make_ai_core(overrides={**NOT_ALLOWED, "plugins.ai_core.openai_base_url": f"{provider.url}/ok/v1",
                                            "plugins.ai_core.openai_api_key": "sk-local",
                                            "plugins.ai_core.default_model": "llama3"})
    events = await chat(ai_core, text="hello")
    assert events[-1]["model"] == "llama3" and text_of(events) == "Hello from llama3."
    assert provider.requests[-1]["authorization"] == "Bearer sk-local"
    # Another path on the same endpoint is the same choice; another port is not.
    await add_model(ai_core, "other-port", "http://127.0.0.1:9/v1", chain=["other-port", "llama3"])
    done = (await chat(ai_core, text="hello"))[-1]
    assert done["model"] == "llama3" and done["fallbacks"][0]["kind"] == "refused"


async def test_the_probe_follows_the_same_policy(make_ai_core, provider, recorder):
    ai_core = await make_ai_core(overrides=NOT_ALLOWED)
    for url in ("http://[::1/",  # urlsplit's ValueError was a 500
                f"http://127.0.0.1:{recorder.port}/v1/models", "http://169.254.169.254/latest/meta-data/"):
        response = await ai_core.post("/api/v1/models/providers/x/probe", headers=SERVICE, json={"url": url})
        answer = await response.json()
        assert answer["error_kind"] == "refused", answer
    assert "[fetch] model_hosts" in answer["error"] or "169.254.169.254" in answer["error"]
    assert recorder.connections == 0
    allowed = await make_ai_core(overrides={**NOT_ALLOWED, "fetch.model_hosts": [f"127.0.0.1:{provider.port}"]})
    response = await allowed.post("/api/v1/models/providers/x/probe", headers=SERVICE,
                                  json={"url": f"{provider.url}/ollama/api/tags"})
    assert (await response.json())["status"] == 200
