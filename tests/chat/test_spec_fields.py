"""The ServerMessage fields of the spec that a person's devices read, over a real `/ws/chat` with
two devices of the same person: `client_info` on the echo (the connection's values, or the
message's own), `multi_message` for several messages delivered together, and `response_mode`
on every frame of a reply."""
from __future__ import annotations

from plugins.chat.contract import CHAT_TURNS
from plugins.sessions.contract import CONVERSATIONS
from tests.chat.conftest import ADMIN, context_of, receive_until, token_for


def ws_path(client, **query) -> str:
    params = {"token": token_for(client, ADMIN), **query}
    return "/ws/chat?" + "&".join(f"{key}={value}" for key, value in params.items())


def reply_frames(frames: list[dict]) -> list[dict]:
    return [frame for frame in frames if frame.get("turn_id")]


async def test_the_echo_names_the_sending_device_and_a_message_may_name_itself(gateway, provider):
    phone_agent = "PhoneBrowser/1.0"
    async with gateway.ws_connect(ws_path(gateway, session_id="devices", client_id="phone-1", device_name="Phone"),
                                  headers={"User-Agent": phone_agent}) as phone, \
            gateway.ws_connect(ws_path(gateway, session_id="devices", client_id="laptop-1")) as laptop:
        # The connection's own values (the handshake's query and User-Agent).
        await phone.send_json({"type": "message", "content": "from the phone", "client_msg_id": "c1"})
        await receive_until(phone, "stream_end")
        echo = (await receive_until(laptop, "stream_end"))[0]
        assert echo["type"] == "response" and echo["role"] == "user"
        assert echo["client_info"] == {"client_id": "phone-1", "device_name": "Phone", "user_agent": phone_agent}

        # The message's own values override the connection's; what it leaves out stays the connection's.
        await phone.send_json({"type": "message", "content": "named", "client_msg_id": "c2",
                               "client_id": "tablet-7", "device_name": "Kitchen tablet"})
        await receive_until(phone, "stream_end")
        echo = (await receive_until(laptop, "stream_end"))[0]
        assert echo["client_info"] == {"client_id": "tablet-7", "device_name": "Kitchen tablet",
                                       "user_agent": phone_agent}

        # A message that waits its turn (its queue row is what the turn is run from) keeps them too.
        provider.gate.clear()
        await phone.send_json({"type": "message", "content": "first", "client_msg_id": "c3"})
        await receive_until(phone, "stream_chunk")
        await phone.send_json({"type": "message", "content": "waits", "client_msg_id": "c4",
                               "device_name": "Watch", "user_agent": "Watch/2"})
        await receive_until(phone, "queued")
        provider.gate.set()
        await receive_until(phone, "stream_end")
        await receive_until(phone, "stream_end")
        frames = await receive_until(laptop, "stream_end")
        frames += await receive_until(laptop, "stream_end")
    echoes = [frame for frame in frames if frame["type"] == "response"]
    assert [echo["content"] for echo in echoes] == ["first", "waits"]
    assert echoes[1]["client_info"] == {"client_id": "phone-1", "device_name": "Watch", "user_agent": "Watch/2"}


async def test_a_device_field_of_the_wrong_kind_is_refused(gateway):
    async with gateway.ws_connect(ws_path(gateway, session_id="bad-device")) as ws:
        await ws.send_json({"type": "message", "content": "hi", "device_name": "x" * 129})
        assert "device_name" in (await ws.receive_json(timeout=5))["error"]
        await ws.send_json({"type": "message", "content": "hi", "client_id": 7})
        assert "client_id" in (await ws.receive_json(timeout=5))["error"]


async def test_several_messages_posted_together_arrive_as_one_multi_message_on_every_device(gateway):
    chat = context_of(gateway).contracts.require(CHAT_TURNS)
    async with gateway.ws_connect(ws_path(gateway, session_id="elsewhere", client_id="phone")) as phone, \
            gateway.ws_connect(ws_path(gateway, session_id="elsewhere", client_id="laptop")) as laptop:
        stored = await chat.post_messages("admin", "together", ["The heating is on.", "The door is locked."],
                                          metadata={"source": "test"})
        received = [await phone.receive_json(timeout=5), await laptop.receive_json(timeout=5)]
        for device in (phone, laptop):  # nothing else came: one frame carried both
            await device.send_json({"type": "ping"})
            assert (await device.receive_json(timeout=5))["type"] == "pong"
    for frame in received:
        assert frame["type"] == "multi_message" and frame["role"] == "assistant" and frame["msg_type"] == "chat"
        assert frame["session_id"] == "together" and isinstance(frame["timestamp"], int)
        assert frame["multi_message"] == {"messages": [
            {"index": 0, "content": "The heating is on.", "msg_type": "chat", "message_id": str(stored[0]["id"])},
            {"index": 1, "content": "The door is locked.", "msg_type": "chat", "message_id": str(stored[1]["id"])}]}
    history = await context_of(gateway).contracts.require(CONVERSATIONS).all_messages("admin", "together")
    assert [(m["role"], m["content"]) for m in history] == [("assistant", "The heating is on."),
                                                            ("assistant", "The door is locked.")]


async def test_every_frame_of_a_reply_carries_the_turns_mode(gateway, provider):
    async with gateway.ws_connect(ws_path(gateway, session_id="modes", client_id="phone")) as phone, \
            gateway.ws_connect(ws_path(gateway, session_id="modes", client_id="laptop")) as laptop:
        for mode in ("text", "voice_msg", "voice_assistant"):
            await phone.send_json({"type": "message", "content": f"in {mode}", "mode": mode})
            for device in (phone, laptop):
                frames = reply_frames(await receive_until(device, "stream_end"))
                assert [frame["type"] for frame in frames][0] == "stream_start"
                assert {"stream_chunk", "review", "stream_end"} <= {frame["type"] for frame in frames}
                assert {frame.get("response_mode") for frame in frames} == {mode}, frames
