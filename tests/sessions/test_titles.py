"""A model's title for a new conversation, end to end: a real ai-core service with the
`session_titles` plugin, a real gateway (sessions, chat) on a loopback port that the AI core
reaches with the service credential, and the local OpenAI-protocol model of
tests/support/fake_openai.py, which answers the title request (recognised by its prompt) with
`title_answer` and every other request with a sentence."""
from __future__ import annotations

import asyncio

import aiohttp
import pytest

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import Identity
from gateway.plugins import REGISTRY
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.auth.contract import TOKENS
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.title_text import title_from
from plugins.sessions.titles import clean_title
from plugins.sessions.titles import plugin as titles_plugin
from tests.support.fake_openai import FakeProvider, serve_fake_provider, route_to_model
from tests.support.servers import free_port

ALICE = Identity(user_id="user_alice", username="alice")
SERVICE = {"Authorization": "Bearer test-service-token"}
FIRST = "What should I cook for dinner tonight? Something with mushrooms please"


class Services:
    def __init__(self, ai_core, gateway_url: str, token: str, provider: FakeProvider):
        self.ai_core, self.gateway_url, self.token, self.provider = ai_core, gateway_url, token, provider

    def title_requests(self) -> list[dict]:
        return [r for r in self.provider.requests if r["body"] and self.provider.asks_title(r["body"])]

    async def background_done(self) -> None:
        """The AI core's turn listeners finished."""
        scheduler = get_context(self.ai_core.app).scheduler
        jobs = len(self.ai_core.app[REGISTRY].jobs)  # the service's own, which run as long as it does
        deadline = asyncio.get_running_loop().time() + 30
        while scheduler.active_count > jobs or scheduler.pending_count:
            assert asyncio.get_running_loop().time() < deadline, "the listeners did not finish"
            await asyncio.sleep(0.05)


@pytest.fixture
async def provider(aiohttp_server) -> FakeProvider:
    return await serve_fake_provider(aiohttp_server)


@pytest.fixture
def make_services(database_url, aiohttp_server, make_config, provider):
    async def build(with_model: bool = True) -> Services:
        gateway_port = free_port()
        gateway_url = f"http://127.0.0.1:{gateway_port}"
        settings = {"database.url": database_url, "peers.gateway_url": gateway_url, "auth.chat_for_all_users": True,
                    "plugins.ai_core": {"first_token_timeout": 5, "idle_timeout": 5, "timezone": "UTC"}}
        ai_core = await aiohttp_server(create_app("ai-core", make_config(settings),
                                                  plugins=[tokens_plugin, ai_core_plugin, titles_plugin]))
        ai_core_url = str(ai_core.make_url("")).rstrip("/")
        if with_model:
            await route_to_model(ai_core_url, f"{provider.url}/plain/v1", SERVICE)
        gateway_app = create_app("gateway", make_config({**settings, "peers.ai_core_url": ai_core_url}), plugins=[
            tokens_plugin, sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin])
        await aiohttp_server(gateway_app, port=gateway_port)
        token = get_context(gateway_app).contracts.require(TOKENS).issue_access(ALICE)[0]
        return Services(ai_core, gateway_url, token, provider)
    return build


async def say(ws, text: str) -> None:
    """Send `text`; return at the reply's end."""
    await ws.send_json({"type": "message", "content": text})
    while True:
        frame = await asyncio.wait_for(ws.receive_json(), 30)
        assert frame["type"] != "error", frame
        if frame["type"] == "stream_end":
            return


async def frame_of_type(ws, kind: str) -> dict:
    while True:
        frame = await asyncio.wait_for(ws.receive_json(), 30)
        if frame["type"] == kind:
            return frame


async def session_of(http: aiohttp.ClientSession, services: Services, session_id: str) -> dict:
    async with http.get(f"{services.gateway_url}/api/v1/sessions/{session_id}",
                        headers={"Authorization": f"Bearer {services.token}"}) as response:
        assert response.status == 200, await response.text()
        return await response.json()


def device(http: aiohttp.ClientSession, services: Services, session_id: str, client_id: str):
    return http.ws_connect(f"{services.gateway_url}/ws/chat?token={services.token}&session_id={session_id}"
                           f"&client_id={client_id}")


async def test_after_the_first_exchange_the_model_titles_the_session_and_every_device_hears(make_services):
    services = await make_services()
    services.provider.title_answer = 'Title: "Mushroom dinner ideas."'
    async with aiohttp.ClientSession() as http:
        async with device(http, services, "dinner", "phone") as phone, \
                device(http, services, "dinner", "laptop") as laptop:
            await say(phone, FIRST)
            updated = await frame_of_type(laptop, "session_updated")
            assert updated == {"type": "session_updated", "session_id": "dinner", "title": "Mushroom dinner ideas"}
            assert (await session_of(http, services, "dinner"))["title"] == "Mushroom dinner ideas"
            # The request: the title purpose's prompt, the exchange, a few tokens.
            [request] = services.title_requests()
            assert request["body"]["max_tokens"] == 60
            assert f"user: {FIRST}\nassistant: Hello from scripted." in request["body"]["messages"][-1]["content"]

            # A second exchange does not retitle.
            await say(phone, "And a dessert?")
            await services.background_done()
            assert len(services.title_requests()) == 1
            assert (await session_of(http, services, "dinner"))["title"] == "Mushroom dinner ideas"


async def test_a_title_the_person_gave_meanwhile_is_kept(make_services):
    services = await make_services()
    hold = asyncio.Event()
    services.provider.title_answer = "Mushroom dinner ideas"

    async with aiohttp.ClientSession() as http:
        async with device(http, services, "dinner", "phone") as phone, \
                device(http, services, "dinner", "laptop") as laptop:
            # The title request waits (the model is slow) while the person renames the session.
            services.provider.title_gate = hold
            await say(phone, FIRST)
            deadline = asyncio.get_running_loop().time() + 30
            while not services.title_requests():
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.02)
            async with http.patch(f"{services.gateway_url}/api/v1/sessions/dinner", json={"title": "Tonight"},
                                  headers={"Authorization": f"Bearer {services.token}"}) as response:
                assert response.status == 200, await response.text()
            assert (await frame_of_type(laptop, "session_updated"))["title"] == "Tonight"
            hold.set()
            await services.background_done()
            assert (await session_of(http, services, "dinner"))["title"] == "Tonight"
    assert len(services.title_requests()) == 1


async def test_without_a_model_the_title_stays_the_first_message_and_nothing_is_asked(make_services):
    services = await make_services(with_model=False)
    async with aiohttp.ClientSession() as http:
        async with device(http, services, "offline", "phone") as phone:
            await say(phone, FIRST)
            await services.background_done()
            assert (await session_of(http, services, "offline"))["title"] == title_from(FIRST)
    assert services.provider.requests == []


async def test_the_conditional_rename_answers_409_when_the_title_changed(make_services):
    services = await make_services(with_model=False)
    async with aiohttp.ClientSession(headers=SERVICE) as http:
        url = f"{services.gateway_url}/api/v1/sessions/notes"
        async with http.post(f"{services.gateway_url}/api/v1/sessions", json={"session_id": "notes", "title": "Shopping"},
                             headers={"Authorization": f"Bearer {services.token}"}) as response:
            assert response.status == 201, await response.text()
        async with http.patch(url, params={"user_id": "user_alice"},
                              json={"title": "Groceries", "if_title": "Something else"}) as response:
            assert response.status == 409
            assert (await response.json())["errorType"] == "title_changed"
        async with http.patch(url, params={"user_id": "user_alice"},
                              json={"title": "Groceries", "if_title": "Shopping"}) as response:
            assert response.status == 200
            assert (await response.json())["title"] == "Groceries"
        async with http.patch(f"{services.gateway_url}/api/v1/sessions/missing", params={"user_id": "user_alice"},
                              json={"title": "Groceries", "if_title": "Shopping"}) as response:
            assert response.status == 404


@pytest.mark.parametrize("answer, title", [
    ('Title: "Mushroom dinner ideas."', "Mushroom dinner ideas"),
    ("<think>about food</think>\n**Title:** Weekend trip to Berlin", "Weekend trip to Berlin"),
    ("「晚餐做什么」。", "晚餐做什么"),
    ("标题：周末计划", "周末计划"),
    ("   \n", None),
    ("word " * 30, ("word " * 12).strip()),
])
def test_a_models_answer_is_cleaned_into_a_title(answer, title):
    assert clean_title(answer) == title
