"""Personal API keys at the assistant's doors (docs/auth.md, "Personal API keys"): a key with the
`chat` scope opens /ws/chat and the AI core's OpenAI door; one without it is refused (403
`insufficient_scope`); a revoked key and a disabled person's token are refused by the AI core at
once, although it is another service on its own bus (it reads the shared database)."""
from __future__ import annotations

import aiohttp
import pytest

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import AuthPlugin, tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.auth.people_support import API, admin_token, bearer, person_with_login
from tests.support.fake_openai import route_to_model

SERVICE_TOKEN = "test-service-token"


@pytest.fixture
async def doors(database_url, provider, aiohttp_server, aiohttp_client, make_config, chat_settings):
    """The gateway (with the auth plugin) and the AI core, people allowed to chat."""
    everyone = {"auth.chat_for_all_users": True, "database.url": database_url,
                "plugins.auth": {"bcrypt_rounds": 4, "rate_limit_per_minute": 1000}}
    ai_core = await aiohttp_server(create_app("ai-core", make_config(everyone),
                                              plugins=[tokens_plugin, ai_core_plugin]))
    ai_core_url = str(ai_core.make_url("")).rstrip("/")
    await route_to_model(ai_core_url, provider.url, {"Authorization": f"Bearer {SERVICE_TOKEN}"}, purposes=("chat",))
    config = make_config({**everyone, "peers.ai_core_url": ai_core_url, "plugins.chat": chat_settings})
    gateway = await aiohttp_client(create_app("gateway", config, plugins=[
        tokens_plugin, AuthPlugin(), sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin]))
    return gateway, await aiohttp_client(ai_core)


async def new_key(gateway, token: str, scopes: list[str]) -> str:
    answer = await gateway.post(f"{API}/auth/api-keys", json={"name": "doors", "scopes": scopes},
                                headers=bearer(token))
    assert answer.status == 201, await answer.text()
    return (await answer.json())["key"]


async def test_a_chat_key_opens_both_doors_and_a_read_key_neither(doors):
    gateway, ai_core = doors
    admin = await admin_token(gateway)
    _, login = await person_with_login(gateway, admin, "kim")
    chat_key = await new_key(gateway, login["token"], ["chat"])
    read_key = await new_key(gateway, login["token"], ["read"])

    async with gateway.ws_connect(f"/ws/chat?token={chat_key}") as socket:
        assert not socket.closed
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.ws_connect(f"/ws/chat?token={read_key}")
    assert refused.value.status == 403

    models = await ai_core.get("/v1/models", headers=bearer(chat_key))
    assert models.status == 200, await models.text()
    completion = await ai_core.post("/v1/chat/completions", headers=bearer(chat_key),
                                    json={"model": "assistant", "messages": [{"role": "user", "content": "hi"}]})
    assert completion.status == 200, await completion.text()
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions")):
        answer = await ai_core.request(method, path, headers=bearer(read_key),
                                       json={"model": "assistant", "messages": [{"role": "user", "content": "hi"}]})
        assert answer.status == 403 and (await answer.json())["errorType"] == "insufficient_scope"
    # The chat key reaches no REST route of the gateway; the read key reads.
    assert (await gateway.get(f"{API}/sessions", headers=bearer(chat_key))).status == 403
    assert (await gateway.get(f"{API}/sessions", headers=bearer(read_key))).status == 200


async def test_the_ai_core_refuses_a_revoked_key_and_a_disabled_person_at_once(doors):
    gateway, ai_core = doors
    admin = await admin_token(gateway)
    _, login = await person_with_login(gateway, admin, "lou")
    key = await new_key(gateway, login["token"], ["chat"])
    assert (await ai_core.get("/v1/models", headers=bearer(key))).status == 200
    assert (await ai_core.get("/v1/models", headers=bearer(login["token"]))).status == 200
    listed = await (await gateway.get(f"{API}/auth/api-keys", headers=bearer(login["token"]))).json()
    key_id = listed["keys"][0]["id"]
    assert listed["keys"][0]["last_used_at"] is not None
    assert (await gateway.delete(f"{API}/auth/api-keys/{key_id}", headers=bearer(login["token"]))).status == 200
    refused = await ai_core.get("/v1/models", headers=bearer(key))
    assert refused.status == 401 and (await refused.json())["errorType"] == "invalid_api_key"

    await gateway.patch(f"{API}/admin/users/user_lou", json={"disabled": True}, headers=bearer(admin))
    refused = await ai_core.get("/v1/models", headers=bearer(login["token"]))
    assert refused.status == 401 and (await refused.json())["errorType"] == "account_disabled"


async def test_a_one_time_passwords_login_opens_neither_door_until_the_password_is_changed(doors):
    """The limit is a claim of the token: the AI core refuses it too, without asking the gateway."""
    gateway, ai_core = doors
    admin = await admin_token(gateway)
    person = await (await gateway.post(f"{API}/admin/users", json={"username": "max"}, headers=bearer(admin))).json()
    login = await (await gateway.post(f"{API}/auth/login", json={"username": "max",
                                                                 "password": person["one_time_password"]})).json()
    assert login["password_change_required"] is True
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.ws_connect(f"/ws/chat?token={login['token']}")
    assert refused.value.status == 403
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions")):
        answer = await ai_core.request(method, path, headers=bearer(login["token"]),
                                       json={"model": "assistant", "messages": [{"role": "user", "content": "hi"}]})
        assert answer.status == 403 and (await answer.json())["errorType"] == "password_change_required"

    changed = await gateway.post(f"{API}/auth/password", headers=bearer(login["token"]),
                                 json={"current_password": person["one_time_password"], "new_password": "max-own"})
    assert changed.status == 200, await changed.text()
    token = (await changed.json())["token"]
    async with gateway.ws_connect(f"/ws/chat?token={token}") as socket:
        assert not socket.closed
    assert (await ai_core.get("/v1/models", headers=bearer(token))).status == 200
