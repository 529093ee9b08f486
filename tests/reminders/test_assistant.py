"""The assistant sets reminders: a real AI core with the `reminder_tools` plugin, with no language
model configured (its offline agent answers), asking a real gateway (chat, notifications and
reminders on real PostgreSQL) with the service credential acting for the person.

Done means: "提醒我明天早上九点给妈妈打电话" said over /ws/chat creates a reminder for 09:00
tomorrow in the person's zone, and at that time (the gateway's clock moved there) the phone and
the laptop both get the notification."""
from __future__ import annotations

import asyncio
from datetime import datetime

import aiohttp
import pytest

from gateway.app import create_app
from gateway.clock import ManualClock
from gateway.context import get_context
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import auth_plugin, tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.reminders import plugin as reminders_plugin
from plugins.reminders.assistant import tools_plugin as reminder_tools_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.notifications.devices import until
from tests.support.servers import free_port

from .conftest import START, UTC


class Services:
    def __init__(self, gateway: aiohttp.ClientSession, clock: ManualClock):
        self.gateway = gateway
        self.clock = clock


@pytest.fixture
async def services(database_url, aiohttp_server, make_config):
    gateway_port = free_port()
    gateway_url = f"http://127.0.0.1:{gateway_port}"
    settings = {"database.url": database_url, "peers.gateway_url": gateway_url,
                "auth.registration_enabled": True, "auth.chat_for_all_users": True,
                "plugins.ai_core": {"tool_timeout": 20, "timezone": "UTC"},
                "plugins.auth": {"default_timezone": "Asia/Shanghai", "bcrypt_rounds": 4}}
    # One clock for both services: the AI core reads "now" from it, the gateway fires by it.
    clock = ManualClock(START)  # Tuesday 24 November 2026, 14:00 in Shanghai
    ai_core_app = create_app("ai-core", make_config(settings),
                             plugins=[tokens_plugin, ai_core_plugin, reminder_tools_plugin])
    get_context(ai_core_app).clock = clock
    ai_core = await aiohttp_server(ai_core_app)
    gateway_app = create_app("gateway", make_config({**settings, "peers.ai_core_url": str(ai_core.make_url("")).rstrip("/")}),
                             plugins=[tokens_plugin, auth_plugin, sessions_plugin, files_plugin, ai_core_client_plugin,
                                      chat_plugin, notifications_plugin, reminders_plugin])
    get_context(gateway_app).clock = clock
    await aiohttp_server(gateway_app, port=gateway_port)
    async with aiohttp.ClientSession(gateway_url) as session:
        yield Services(session, clock)


async def sign_up(services: Services, username: str) -> str:
    async with services.gateway.post("/api/v1/auth/register", json={
            "username": username, "password": "secret-pass", "email": f"{username}@example.org",
            "nickname": username, "verify_code": "ABC123"}) as response:
        assert response.status == 201, await response.text()
        return (await response.json())["token"]


def device(services: Services, token: str, client_id: str, session_id: str = "main"):
    return services.gateway.ws_connect(f"/ws/chat?token={token}&session_id={session_id}&client_id={client_id}")


async def say(ws, text: str) -> str:
    """Send `text` as a chat message; the assistant's reply (its stream_end)."""
    await ws.send_json({"type": "message", "content": text})
    while True:
        frame = await asyncio.wait_for(ws.receive_json(), 30)
        if frame["type"] == "error":
            raise AssertionError(frame)
        if frame["type"] == "stream_end":
            return frame["text"]


async def next_of_type(ws, kind: str, timeout: float = 10) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        frame = await asyncio.wait_for(ws.receive_json(), max(0.0, deadline - asyncio.get_running_loop().time()))
        if frame["type"] == kind:
            return frame


async def reminders_of(services: Services, token: str, **params) -> list[dict]:
    async with services.gateway.get("/api/v1/reminders", params=params,
                                    headers={"Authorization": f"Bearer {token}"}) as response:
        assert response.status == 200, await response.text()
        return (await response.json())["reminders"]


async def test_done_means_said_in_chinese_it_reaches_the_phone_and_the_laptop_at_nine(services):
    token = await sign_up(services, "alice")
    async with device(services, token, "phone") as phone, device(services, token, "laptop") as laptop:
        reply = await say(phone, "提醒我明天早上九点给妈妈打电话")
        assert reply == "好的，明天（11月25日）09:00 提醒你给妈妈打电话。"
        [reminder] = await reminders_of(services, token)
        assert reminder["title"] == "给妈妈打电话" and reminder["remind_at"] == "2026-11-25T09:00:00+08:00"
        assert reminder["timezone"] == "Asia/Shanghai" and reminder["session_id"] == "main"
        assert reminder["repeat_type"] == "none" and reminder["status"] == "pending"
        services.clock.set(datetime(2026, 11, 25, 0, 59, 59, tzinfo=UTC))
        await asyncio.sleep(0.2)
        assert (await reminders_of(services, token))[0]["notified"] is False  # not a second early
        services.clock.set(datetime(2026, 11, 25, 1, 0, tzinfo=UTC))  # 09:00 in Shanghai
        for ws in (phone, laptop):
            frame = await next_of_type(ws, "notification")
            notification = frame["notification"]
            assert notification["type"] == "reminder" and notification["title"] == "给妈妈打电话"
            assert notification["timestamp"] == "2026-11-25T01:00:00.000Z"
            assert notification["data"]["reminder_id"] == reminder["id"] and notification["data"]["late"] is False

    async def notified() -> bool:  # the frames go out just before the firing's transaction commits
        return (await reminders_of(services, token))[0]["notified"]
    await until(notified)


async def test_the_other_phrases_and_list_cancel_complete(services):
    token = await sign_up(services, "bob")
    async with device(services, token, "phone") as phone:
        assert await say(phone, "in 20 minutes remind me to take the pizza out") == \
            "I'll remind you to take the pizza out today at 14:20."
        assert await say(phone, "every weekday at 7:30 remind me to take my pills") == \
            "I'll remind you to take my pills every weekday at 07:30, starting tomorrow (Wed 25 Nov)."
        assert await say(phone, "二十分钟后提醒我关火") == "好的，今天14:20 提醒你关火。"
        assert await say(phone, "每天早上七点提醒我吃药") == "好的，从明天（11月25日）起，每天 07:00 提醒你吃药。"
        assert await say(phone, "remind me to call mom tomorrow at 9am") == \
            "I'll remind you to call mom tomorrow (Wed 25 Nov) at 09:00."
        assert await say(phone, "remind me to turn on the oven at 6") == \
            "I'll remind you to turn on the oven today at 18:00."
        stored = {r["title"]: r for r in await reminders_of(services, token)}
        assert stored["take my pills"]["repeat_type"] == "weekdays"
        assert stored["吃药"]["repeat_type"] == "daily" and stored["吃药"]["remind_at"] == "2026-11-25T07:00:00+08:00"
        assert stored["take the pizza out"]["remind_at"] == "2026-11-24T14:20:00+08:00"
        listing = await say(phone, "what are my reminders")
        assert listing.startswith("You have 6 pending reminders:\n1. ")  # soonest first
        assert "take the pizza out — Tue 24 Nov 14:20" in listing and "\n6. call mom — Wed 25 Nov 09:00" in listing
        assert "吃药 — Wed 25 Nov 07:00, every day" in listing
        chinese = await say(phone, "我有哪些提醒")
        assert chinese.startswith("你有 6 个待办提醒：\n1. ") and "吃药 —— 11月25日（周三）07:00，每天" in chinese
        cancelled = await say(phone, "cancel the reminder to call mom")
        assert cancelled == "Done: the reminder “call mom” (Wed 25 Nov 09:00) is cancelled."
        completed = await say(phone, "把吃药的提醒标记为完成")
        assert completed == "好的，已完成提醒“吃药”（11月25日（周三）07:00，每天）。"
        assert await say(phone, "cancel the reminder to water the moon") == \
            "I found no pending reminder matching “water the moon”."
        assert await say(phone, "remind me to call the plumber") == \
            "When should I remind you to call the plumber? For example “tomorrow at 9am” or “in 20 minutes”."
    statuses = {r["title"]: r["status"] for r in await reminders_of(services, token, limit=50)}
    assert statuses["call mom"] == "cancelled" and statuses["吃药"] == "completed"
    assert len(await reminders_of(services, token, status="pending")) == 4


async def test_the_time_is_read_in_the_zone_of_the_persons_profile(services):
    token = await sign_up(services, "carol")
    async with services.gateway.put("/api/v1/profile", json={"timezone": "America/New_York"},
                                    headers={"Authorization": f"Bearer {token}"}) as response:
        assert response.status == 200, await response.text()
    async with device(services, token, "phone") as phone:
        # 06:00 UTC is 01:00 on Tuesday in New York: "tomorrow" is Wednesday there too.
        assert await say(phone, "remind me to call mom tomorrow at 9am") == \
            "I'll remind you to call mom tomorrow (Wed 25 Nov) at 09:00."
    [reminder] = await reminders_of(services, token)
    assert reminder["remind_at"] == "2026-11-25T09:00:00-05:00" and reminder["timezone"] == "America/New_York"
