"""The one rule of who may chat (docs/chat.md, "Who may chat") at automation's door: an
`assistant` action runs a chat turn as the rule's owner, so with chat limited to the
administrator a person can neither save one (in a rule or a scene) nor have a saved one run;
the administrator's runs, and with `[auth] chat_for_all_users` everyone's
(test_actions.py)."""
from __future__ import annotations

from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.chat import plugin as chat_plugin
from tests.automation.conftest import API

LIMITED = {"auth.chat_for_all_users": False}
ASK = {"type": "assistant", "prompt": "list my automations", "deliver": ["session"]}


async def test_a_person_who_may_not_chat_cannot_save_an_assistant_action(make_stack):
    stack = await make_stack(shared=LIMITED)
    gateway = stack.gateway
    client = gateway.client
    for path, body in ((f"{API}/rules", {"name": "Ask", "trigger_type": "manual", "actions": [ASK]}),
                       (f"{API}/scenes", {"name": "Ask", "actions": [ASK]})):
        response = await client.post(path, headers=gateway.alice, json=body)
        answer = await response.json()
        assert response.status == 403, answer
        assert answer["errorType"] == "admin_only" and "assistant action" in answer["error"] and answer["hint"]
        # ...nor for her by the administrator, since the turn would be hers.
        response = await client.post(f"{path}?user_id=user_alice", headers=gateway.admin, json=body)
        assert response.status == 403
    listed = await (await client.get(f"{API}/rules", headers=gateway.alice)).json()
    assert listed["rules"] == []
    # Other actions stay hers to use.
    await gateway.create_rule(gateway.alice, name="Note", trigger_type="manual",
                              actions=[{"type": "message", "text": "hello"}])

    # The administrator's own assistant action runs, and the reply comes back.
    rule = await gateway.create_rule(gateway.admin, name="Ask", trigger_type="manual", actions=[ASK])
    answer = await (await client.post(f"{API}/rules/{rule['id']}/trigger", headers=gateway.admin)).json()
    assert answer["results"][0]["ok"] is True and answer["results"][0]["reply"], answer


async def test_a_saved_assistant_action_does_not_run_once_chat_is_limited(make_stack, make_gateway):
    stack = await make_stack()  # every user may chat: Alice saves a rule that asks the assistant
    rule = await stack.gateway.create_rule(stack.gateway.alice, name="Ask", trigger_type="manual",
                                           actions=[ASK, {"type": "message", "text": "asked"}])
    # The operator limits chat to the administrator: a gateway on the same database, so configured.
    limited = await make_gateway(ai_core_client_plugin, chat_plugin, **LIMITED,
                                 **{"peers.ai_core_url": stack.ai_core_url})
    response = await limited.client.post(f"{API}/rules/{rule['id']}/trigger", headers=limited.alice)
    assert response.status == 200, await response.text()
    results = (await response.json())["results"]
    assert results[0]["ok"] is False and "may not chat" in results[0]["error"], results
    assert results[1]["ok"] is True  # the rule's other actions still run
    history = await (await limited.client.get("/api/v1/sessions/automation/messages",
                                              headers=limited.alice)).json()
    assert [message["content"] for message in history["messages"]] == ["asked"]  # no turn was run
