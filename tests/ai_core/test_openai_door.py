"""The OpenAI-compatible door driven by the official `openai` client: its API key is a gateway
access token, answers go through the same routing and fallback, streaming and not."""
import openai
import pytest

from tests.ai_core.conftest import access_token, bearer, configure


def client_for(ai_core, token: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(ai_core.make_url("/v1")), api_key=token, max_retries=0)


async def test_completions_with_fallback_streaming_and_not(ai_core, provider):
    await configure(ai_core, provider, {"flaky": "broken", "steady": "ok"}, chain=["flaky", "steady"])
    async with client_for(ai_core, access_token()) as client:
        completion = await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "hello"}], temperature=0.2)
        assert completion.choices[0].message.content == "Hello from upstream-steady."
        assert completion.model == "steady" and completion.choices[0].finish_reason == "stop"
        assert provider.requests[-1]["body"]["temperature"] == 0.2

        stream = await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "hello"}], stream=True)
        pieces, models, finishes = [], set(), []
        async for chunk in stream:
            models.add(chunk.model)
            if chunk.choices:
                pieces.append(chunk.choices[0].delta.content or "")
                finishes.append(chunk.choices[0].finish_reason)
        assert "".join(pieces) == "Hello from upstream-steady."
        assert finishes[-1] == "stop" and "steady" in models

        # Naming a model puts it first; the rest of the chain stays as the fallback.
        completion = await client.chat.completions.create(
            model="steady", messages=[{"role": "user", "content": "hi"}])
        assert completion.model == "steady"
        assert provider.requests[-1]["body"]["model"] == "upstream-steady"

        listed = await client.models.list()
        assert [m.id for m in listed.data] == ["assistant", "embeddings", "flaky", "steady"]

        with pytest.raises(openai.NotFoundError):
            await client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])


async def test_a_mid_stream_failure_reaches_the_client_as_an_error(ai_core, provider):
    await configure(ai_core, provider, {"dying": "dies"}, chain=["dying"])
    async with client_for(ai_core, access_token()) as client:
        stream = await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "hello"}], stream=True)
        text = ""
        with pytest.raises(openai.APIError) as failure:
            async for chunk in stream:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
        assert text == "Partial answer"
        assert "dying failed mid-answer" in str(failure.value)


async def test_only_gateway_users_get_in(ai_core):
    async with client_for(ai_core, "sk-not-a-gateway-token") as client:
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()
    async with client_for(ai_core, access_token(typ="refresh")) as client:
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "x"}])


async def test_without_a_model_the_offline_agent_answers_openai_clients(ai_core):
    async with client_for(ai_core, access_token()) as client:
        completion = await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "现在几点"}])
    assert completion.model == "offline-agent"
    assert completion.choices[0].message.content.startswith("现在是 ")


@pytest.mark.parametrize("setting", [{"auth.chat_for_all_users": False}, {"auth.chat_for_all_users": True}])
async def test_the_doors_follow_the_chat_channels_access_rule(make_ai_core, setting):
    """Administrator only unless every user may chat (`[auth] chat_for_all_users`): the same
    rule as /ws/chat, on every door to a model."""
    ai_core = await make_ai_core(overrides=setting)
    everyone = setting["auth.chat_for_all_users"]
    question = [{"role": "user", "content": "现在几点"}]
    async with client_for(ai_core, access_token()) as client:
        if everyone:
            completion = await client.chat.completions.create(model="assistant", messages=question)
            assert completion.model == "offline-agent"
        else:
            with pytest.raises(openai.PermissionDeniedError) as refused:
                await client.chat.completions.create(model="assistant", messages=question)
            assert refused.value.response.json()["errorType"] == "admin_only"
            with pytest.raises(openai.PermissionDeniedError):
                await client.models.list()
    for path, body in [("/api/v1/chat/stream", {"text": "hi"}), ("/api/v1/vision/describe", {"image": "x"})]:
        response = await ai_core.post(path, json=body, headers=bearer(access_token()))
        assert (response.status == 403) is not everyone, (path, response.status)
    # The administrator always gets in.
    async with client_for(ai_core, access_token("admin", "admin", admin=True)) as client:
        assert (await client.chat.completions.create(model="assistant", messages=question)).model == "offline-agent"
