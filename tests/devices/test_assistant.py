"""The assistant operating the devices: the device tools of the `device_tools` plugin in a real AI
core, asking a real gateway (its `devices` plugin, in front of the real IoT service) with the
service credential acting for the person, over /ws/chat.

Without a model, the offline agent reads the person's words in English and Chinese, operates or
reads the device and says what it did; with a model (a small OpenAI-compatible server that calls
the tool it is told to, then answers with the tool's result), the model's arguments reach the
same tools."""
from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from aiohttp import web

from tests.devices.conftest import ALICE, BOB, SERVICE, chat_socket, frames_of_type, nothing_of_type, url_of
from tests.support.fake_openai import route_to_model


async def frames_until(ws, kind: str, timeout: float = 30.0) -> list[dict]:
    """Every frame up to the first of type `kind` (or an `error`)."""
    frames = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        frame = await asyncio.wait_for(ws.receive_json(), max(0.0, deadline - loop.time()))
        frames.append(frame)
        if frame["type"] in (kind, "error"):
            return frames


async def ask(gateway, user: dict, text: str, session_id: str = "home-chat") -> list[dict]:
    """The frames of one turn over /ws/chat, up to its `stream_end`."""
    ws = await chat_socket(gateway, user, session_id=session_id, client_id=f"asker-{session_id}")
    try:
        await ws.send_json({"type": "message", "content": text})
        return await frames_until(ws, "stream_end")
    finally:
        await ws.close()


def reply_of(frames: list[dict]) -> str:
    assert frames[-1]["type"] == "stream_end", frames[-1]
    return frames[-1]["text"]


async def state_of(gateway, device_id: str, user: dict = ALICE) -> dict:
    response = await gateway.get(f"/api/v1/devices/{device_id}", headers=user)
    assert response.status == 200, await response.text()
    return (await response.json())["device"]["state"]


async def tool_calls(ai_core_url: str, user_id: str, tool_name: str) -> list[dict]:
    async with aiohttp.ClientSession(headers=SERVICE) as session:
        async with session.get(f"{ai_core_url}/api/v1/tools/calls",
                               params={"tool_name": tool_name, "user_id": user_id}) as response:
            assert response.status == 200, await response.text()
            return (await response.json())["calls"]


async def test_done_means_打开客厅的灯_over_the_chat_with_no_model(assistant_home):
    """The issue's "Done means": the simulated living-room light switches on, the reply says so,
    every open device of the person receives the device_update, and the operation is in the
    history."""
    gateway = assistant_home.gateway
    assert (await state_of(gateway, "living_room_light"))["on"] is False
    phone = await chat_socket(gateway, ALICE, session_id="home-chat", client_id="phone")
    tablet = await chat_socket(gateway, ALICE, session_id="elsewhere", client_id="tablet")
    stranger = await chat_socket(gateway, BOB, client_id="bob")
    try:
        await phone.send_json({"type": "message", "content": "打开客厅的灯"})
        frames = await frames_until(phone, "stream_end")
        assert frames[-1]["text"] == "已打开客厅灯。" and frames[-1]["finish_reason"] == "stop"
        for ws in (phone, tablet):
            seen = [frame for frame in frames if frame["type"] == "device_update"] if ws is phone else []
            update, = seen or await frames_of_type(ws, "device_update")
            assert update["device_id"] == "living_room_light" and update["device"]["state"]["on"] is True
            assert update["changes"]["on"] == {"from": False, "to": True}
        await nothing_of_type(stranger, "device_update")
    finally:
        for ws in (phone, tablet, stranger):
            await ws.close()
    assert (await state_of(gateway, "living_room_light"))["on"] is True
    history = await (await gateway.get("/api/v1/devices/living_room_light/history", headers=ALICE)).json()
    latest = history["operations"][0]
    assert (latest["action"], latest["source"], latest["success"]) == ("switch", "assistant", True)
    assert latest["changes"]["on"] == {"from": False, "to": True}
    assert update["operation_id"] == latest["id"]
    calls = await tool_calls(assistant_home.ai_core_url, "user_alice", "operate_device")
    assert calls[0]["status"] == "completed" and calls[0]["model"] == "offline-agent"
    assert calls[0]["arguments"] == {"room": "客厅", "type": "light", "action": "switch", "value": True}


async def test_the_offline_agent_operates_and_reads_the_devices_in_english(assistant_home):
    gateway = assistant_home.gateway
    said = {}
    for text in ["turn on the living room light", "set the bedroom AC to 24 degrees", "is the front door locked?",
                 "dim the living room light to 30%", "open the curtains", "what's the temperature in the bedroom",
                 "what's the temperature in the living room",
                 "turn off the living room light", "unlock the front door", "yes", "is the front door locked?",
                 "turn on the light", "list my devices", "remind me to turn on the bedroom light at 7pm",
                 "turn on the bedroom light", "turn off all the lights"]:
        said[text] = reply_of(await ask(gateway, ALICE, text))
    assert said["turn on the living room light"] == "Done: I turned on the living room light."
    assert said["set the bedroom AC to 24 degrees"] == "Done: I set the bedroom air conditioner to 24 °C."
    assert said["dim the living room light to 30%"] == "Done: I set the living room light's brightness to 30%."
    assert said["open the curtains"] == "Done: I opened the living room curtain."
    assert said["what's the temperature in the bedroom"].startswith("It is ")
    assert said["what's the temperature in the bedroom"].endswith(" °C in the bedroom.")
    # The living room has no sensor: its air conditioner's own thermometer answers.
    assert said["what's the temperature in the living room"].startswith("It is ")
    assert said["what's the temperature in the living room"].endswith(" °C in the living room.")
    assert said["turn off the living room light"] == "Done: I turned off the living room light."
    # Even the person's own command to unlock waits for their yes (docs/ai-core.md, "Confirmation").
    assert said["unlock the front door"] == \
        "Unlock the front door lock? This needs your confirmation: say “yes” to go ahead; anything else cancels it."
    assert said["yes"] == "Done: I unlocked the front door lock."
    assert said["is the front door locked?"] == "No, the front door lock is unlocked."
    assert said["turn on the light"] == "Which one do you mean: the bedroom light or living room light?"
    assert said["turn off all the lights"] == \
        "Done: I turned off the bedroom light. The living room light already was like that (off, brightness 30%, 4000 K)."
    assert said["list my devices"].splitlines()[0] == "You have 8 devices:"
    assert "- Living room light (living room): off, brightness 30%, 4000 K" in said["list my devices"]

    states = {device_id: await state_of(gateway, device_id) for device_id in
              ("living_room_light", "bedroom_ac", "living_room_curtain", "front_door_lock")}
    assert states["living_room_light"]["on"] is False and states["living_room_light"]["brightness"] == 30
    assert states["bedroom_ac"]["target_temperature"] == 24
    assert states["living_room_curtain"]["position"] == 100
    assert states["front_door_lock"]["locked"] is False
    # Put off: not done now.
    assert said["remind me to turn on the bedroom light at 7pm"] == \
        "Tell me a little more, for example: “turn on the living room light”."
    assert said["turn on the bedroom light"] == "Done: I turned on the bedroom light."  # off until then


async def test_the_offline_agent_operates_and_reads_the_devices_in_chinese(assistant_home):
    gateway = assistant_home.gateway
    said = {}
    for text in ["门锁了吗", "把卧室空调调到24度", "窗帘拉开一半", "打开客厅的灯", "关闭客厅的灯", "卧室温度多少",
                 "客厅温度多少", "客厅湿度是多少", "锁上门", "我有哪些设备", "打开所有的灯"]:
        said[text] = reply_of(await ask(gateway, BOB, text))
    assert said["门锁了吗"] == "是的，前门智能门锁已锁上。"
    assert said["把卧室空调调到24度"] == "已把卧室空调调到24°C。"
    assert said["窗帘拉开一半"] == "已把客厅窗帘拉开到50%。"
    assert said["打开客厅的灯"] == "已打开客厅灯。"
    assert said["关闭客厅的灯"] == "已关闭客厅灯。"
    assert said["卧室温度多少"].startswith("卧室现在") and said["卧室温度多少"].endswith("°C。")
    assert said["客厅温度多少"].startswith("客厅现在") and said["客厅温度多少"].endswith("°C。")
    # The simulated home has no humidity sensor in the living room: it says so, naming the devices.
    assert said["客厅湿度是多少"].startswith("没有找到这个设备。你的设备有：")
    assert said["锁上门"] == "前门智能门锁本来就是这样（已锁）。"
    assert said["我有哪些设备"].splitlines()[0] == "你有8个设备："
    assert said["打开所有的灯"] == "已打开卧室灯。\n已打开客厅灯。"
    assert (await state_of(gateway, "bedroom_light", BOB))["on"] is True
    assert (await state_of(gateway, "bedroom_ac", BOB))["target_temperature"] == 24
    assert (await state_of(gateway, "living_room_curtain", BOB))["position"] == 50
    # Bob's home only: Alice's is as it was.
    assert (await state_of(gateway, "living_room_curtain", ALICE))["position"] == 0


async def test_an_operation_the_service_refuses_is_said_not_failed(make_iot_service, make_gateway, make_ai_core):
    from tests.support.servers import free_port

    iot = await make_iot_service({"allow_remote_unlock": False})
    port = free_port()
    ai_core = await make_ai_core(f"http://127.0.0.1:{port}")
    gateway = await make_gateway(url_of(iot), ai_core_url=url_of(ai_core), port=port)
    assert reply_of(await ask(gateway, ALICE, "unlock the front door")).startswith("Unlock the front door lock? ")
    reply = reply_of(await ask(gateway, ALICE, "yes"))
    assert reply.startswith("I couldn't do that to the front door lock: "), reply
    assert (await state_of(gateway, "front_door_lock"))["locked"] is True


# ---------------------------------------------------------------- with a model

def sse(delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-devices", "object": "chat.completion.chunk", "created": 1, "model": "handy",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class HandyModel:
    """`/v1/chat/completions`: to the person's words, a call of `tool` with `arguments`; to the
    tool's result, that result as its answer."""

    def __init__(self):
        self.url = ""
        self.tool = "list_devices"
        self.arguments: dict = {}
        self.requests: list[dict] = []
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.completions)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        last = body["messages"][-1]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if last["role"] == "user":
            arguments = json.dumps(self.arguments, ensure_ascii=False)
            await response.write(sse({"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": "call_dev1", "type": "function",
                 "function": {"name": self.tool, "arguments": arguments}}]}))
            await response.write(sse({}, "tool_calls"))
        else:
            await response.write(sse({"role": "assistant", "content": last["content"]}))
            await response.write(sse({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@pytest.fixture
async def handy_model(aiohttp_server):
    model = HandyModel()
    server = await aiohttp_server(model.app)
    model.url = str(server.make_url("/v1")).rstrip("/")
    return model


async def use_model(ai_core_url: str, model: HandyModel) -> None:
    await route_to_model(ai_core_url, model.url, SERVICE, "handy")


async def test_a_model_lists_operates_and_reads_devices_through_the_tools(assistant_home, handy_model):
    gateway = assistant_home.gateway
    await use_model(assistant_home.ai_core_url, handy_model)

    handy_model.tool, handy_model.arguments = "list_devices", {"room": "bedroom"}
    listed = json.loads(reply_of(await ask(gateway, ALICE, "what is in my bedroom?")))
    assert listed["count"] == 4 and {d["id"] for d in listed["devices"]} == \
        {"bedroom_light", "bedroom_ac", "bedroom_temperature", "bedroom_humidity"}

    handy_model.tool = "operate_device"
    handy_model.arguments = {"device": "卧室空调", "action": "set",
                             "properties": {"on": True, "mode": "heat", "target_temperature": 22.5}}
    done = json.loads(reply_of(await ask(gateway, ALICE, "warm up the bedroom")))
    assert done["status"] == "done" and done["device"]["id"] == "bedroom_ac"
    assert done["changes"]["mode"] == {"from": "cool", "to": "heat"} and done["operation_id"]
    assert (await state_of(gateway, "bedroom_ac"))["target_temperature"] == 22.5

    handy_model.arguments = {"room": "living room", "type": "light", "action": "set", "property": "brightness",
                             "value": 150}
    refused = json.loads(reply_of(await ask(gateway, ALICE, "make it very bright")))
    assert refused["status"] == "refused" and refused["error_type"] == "invalid_operation"
    assert "brightness" in refused["error"]
    handy_model.arguments = {**handy_model.arguments, "value": 10**309}  # the IoT service answered 500
    refused = json.loads(reply_of(await ask(gateway, ALICE, "make it infinitely bright")))
    assert refused["status"] == "refused" and refused["error_type"] == "validation_error", refused
    assert "finite" in refused["error"]

    handy_model.tool, handy_model.arguments = "read_device", {"room": "bedroom", "property": "temperature"}
    reading = json.loads(reply_of(await ask(gateway, ALICE, "how warm is the bedroom?")))
    assert reading["status"] == "found" and reading["device"]["id"] == "bedroom_temperature"
    assert isinstance(reading["value"], (int, float)) and reading["unit"] == "°C"

    handy_model.arguments = {"device": "garage door"}
    missing = json.loads(reply_of(await ask(gateway, ALICE, "is the garage open?")))
    assert missing["status"] == "not_found" and len(missing["devices"]) == 8

    calls = await tool_calls(assistant_home.ai_core_url, "user_alice", "operate_device")
    assert [call["model"] for call in calls] == ["handy-model"] * 3
    history = await (await gateway.get("/api/v1/devices/bedroom_ac/history", headers=ALICE)).json()
    assert history["operations"][0]["source"] == "assistant"
