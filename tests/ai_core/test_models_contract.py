"""`MODELS.complete`: one whole answer for a purpose, as a plugin of the ai-core service asks for
background work, against the fake OpenAI-compatible provider: the purpose's rule, its tagged
models, the chat chain as the last resort, failures skipped, None when nothing answers."""
from __future__ import annotations

from gateway.plugins import Plugin
from plugins.ai_core.contract import MODELS, Models
from tests.ai_core.conftest import configure

MESSAGES = [{"role": "system", "content": "Extract facts."}, {"role": "user", "content": "I like tea."}]


class AskingPlugin(Plugin):
    name = "models_test"
    depends = ("ai_core",)
    models: Models

    def setup(self, registrar):
        self.models = registrar.context.contracts.require(MODELS)


async def test_the_purposes_rule_answers_and_a_failing_model_is_skipped(make_ai_core, provider):
    asking = AskingPlugin()
    client = await make_ai_core(asking)
    await configure(client, provider, {"chat1": "plain"}, chain=["chat1"])
    await configure(client, provider, {"down": "broken", "cheap": "plain"}, chain=["down", "cheap"], purpose="memory")
    answer = await asking.models.complete("memory", MESSAGES, max_tokens=300, temperature=0)
    assert answer == "Hello from upstream-cheap."
    asked = [r for r in provider.requests if r["path"].endswith("/chat/completions")]
    assert [r["body"]["model"] for r in asked] == ["upstream-down", "upstream-cheap"]
    body = asked[-1]["body"]
    assert (body["messages"], body["max_tokens"], body["temperature"]) == (MESSAGES, 300, 0)
    assert "tools" not in body


async def test_tagged_models_then_the_chat_chain_then_none(make_ai_core, provider):
    asking = AskingPlugin()
    client = await make_ai_core(asking)
    assert await asking.models.complete("memory", MESSAGES) is None  # no model at all
    await configure(client, provider, {"chat1": "plain"}, chain=["chat1"])
    assert await asking.models.complete("memory", MESSAGES) == "Hello from upstream-chat1."
    await configure(client, provider, {"tagged": "plain"}, tags=["memory"])
    assert await asking.models.complete("memory", MESSAGES) == "Hello from upstream-tagged."
    await configure(client, provider, {"chat1": "broken", "tagged": "broken"}, chain=["chat1"])
    assert await asking.models.complete("memory", MESSAGES) is None  # every one failed
