"""The Automation endpoints (spec: "Automation (bearer)"), the run log, and the named-event door
for outside systems. A caller reaches only their own rules and scenes; another user's answer
404 like ids that do not exist. The administrator acts for a user with `user_id` (query or
body) and reaches any rule or scene by its id."""
from __future__ import annotations

import json
from typing import Any, cast

from aiohttp import web

from gateway.context import get_context
from gateway.errors import BadRequest, Forbidden
from gateway.identity import Identity, current_identity, owner_for, require_user
from gateway.openapi import api_doc
from gateway.validation import load, parse_body, parse_query, read_json
from plugins.chat.contract import chat_refused, may_chat
from plugins.webhooks.contract import WEBHOOK_KEY

from . import store
from .definitions import EventTrigger, check_actions, check_conditions, check_trigger, scene_ids_of
from .runner import Runner, not_found
from .schemas import (EVENT_PATH, ID_PATH, EventAnswer, EventQuery, OwnerQuery, RuleAnswer, RuleCreate, RuleList, RuleSaved,
                      RuleUpdate, RunAnswer, RunList, RunsQuery, SceneAnswer, SceneCreate, SceneList, SceneSaved, SceneUpdate,
                      Succeeded)
from .timing import next_after

RUNNER = web.AppKey("automation.runner", Runner)
MAX_EVENT_PAYLOAD = 16 * 1024
routes = web.RouteTableDef()


def runner_of(request: web.Request) -> Runner:
    return request.config_dict[RUNNER]


def requested_owner(request: web.Request, body: dict | None = None) -> str | None:
    return cast("str | None", (body or {}).get("user_id") or parse_query(request, OwnerQuery())["user_id"])


async def rule_for(request: web.Request, user: Identity, requested: str | None) -> dict:
    """The rule of the path: the caller's own (or `requested`'s, for the administrator); any
    one for the administrator naming no user."""
    owner = None if user.is_admin and requested is None else owner_for(user, requested)
    rule = await store.get_rule(get_context(request).db, request.match_info["rule_id"], owner)
    if rule is None:
        raise not_found("rule")
    return rule


async def scene_for(request: web.Request, user: Identity, requested: str | None) -> dict:
    owner = None if user.is_admin and requested is None else owner_for(user, requested)
    scene = await store.get_scene(get_context(request).db, request.match_info["scene_id"], owner)
    if scene is None:
        raise not_found("scene")
    return scene


async def check_owned_scenes(request: web.Request, owner: str, actions: list[dict]) -> None:
    wanted = scene_ids_of(actions)
    owned = await store.owned_scene_ids(get_context(request).db, owner, wanted)
    missing = [scene for scene in wanted if scene not in owned]
    if missing:
        raise BadRequest(f"Invalid actions: no scene {', '.join(missing)} of yours.", error_type="unknown_scene",
                         hint="List your scenes with GET /api/v1/automation/scenes.")


def check_assistant_allowed(request: web.Request, owner: str, actions: list[dict]) -> None:
    """An `assistant` action runs a chat turn as the owner: only for a person who may chat (the
    chat plugin's one rule), else 403, as at the chat channel's door."""
    if any(action["type"] == "assistant" for action in actions) \
            and not may_chat(get_context(request).config, owner):
        raise Forbidden(f"Invalid actions: an assistant action talks to the assistant as {owner}, and chatting "
                        "with the assistant is limited to the administrator.", error_type=chat_refused().error_type,
                        hint="Use a notify or message action instead, or have the operator set "
                             "[auth] chat_for_all_users = true (CHAT_FOR_ALL_USERS).")


async def checked_rule(request: web.Request, owner: str, rule: dict, previous: dict | None = None) -> Any:
    """The rule's definition checked whole; and when a time trigger is next due (unchanged by
    an update that leaves the trigger and `enabled` alone, so renaming a rule does not move it)."""
    trigger = check_trigger(rule["trigger_type"], rule["trigger_config"])
    check_conditions(rule["conditions"])
    actions = check_actions(rule["actions"])
    check_assistant_allowed(request, owner, actions)
    await check_owned_scenes(request, owner, actions)
    if rule["trigger_type"] != "time" or not rule["enabled"]:
        return None
    if previous is not None and all(previous[key] == rule[key] for key in ("trigger_type", "trigger_config",
                                                                           "enabled")):
        return previous["next_run_at"]
    runner = runner_of(request)
    next_run_at = next_after(trigger, await runner.zone_for(owner, trigger), runner.now())
    if next_run_at is None:
        what = f"at ({trigger['at']}) is in the past" if trigger.get("at") else "the schedule never occurs"
        raise BadRequest(f"Invalid trigger_config: {what}; the rule would never run.",
                         error_type="validation_error", hint="Give a future instant, or a repeat that occurs.")
    return next_run_at


def summary(run: dict, what: str) -> str:
    results = run["results"]
    if run["status"] == "skipped":
        return f"{what} did nothing: {run['note']}"
    succeeded = sum(1 for result in results if result["ok"])
    if not results:
        return f"{what} ran; it has no actions."
    return (f"{what} ran {len(results)} action{'s' if len(results) != 1 else ''}: {succeeded} succeeded"
            + (f", {len(results) - succeeded} failed." if succeeded < len(results) else "."))


# ---------------------------------------------------------------- rules

@routes.get("/api/v1/automation/rules", name="automation.list_rules")
@api_doc("The caller's automation rules, oldest first", query=OwnerQuery, responses={200: RuleList}, errors=(503,))
async def list_rules(request: web.Request) -> web.Response:
    user = await require_user(request)
    owner = owner_for(user, requested_owner(request))
    rules = await store.list_rules(get_context(request).db, owner)
    return web.json_response({"rules": rules, "count": len(rules)})


@routes.post("/api/v1/automation/rules", name="automation.create_rule")
@api_doc("Create an automation rule", body=RuleCreate, query=OwnerQuery, responses={201: RuleSaved},
         errors=(403, 503), description="The trigger, the conditions and every action are checked against their "
                                    "type's fields (docs/automation.md); an unknown type is a 400 naming the known ones.")
async def create_rule(request: web.Request) -> web.Response:
    user = await require_user(request)
    body = await parse_body(request, RuleCreate())
    owner = owner_for(user, requested_owner(request, body))
    rule = {key: body[key] for key in store.RULE_FIELDS}
    rule["name"] = rule["name"].strip()
    for key in ("trigger_config", "conditions"):  # null: none
        rule[key] = {} if rule[key] is None else rule[key]
    next_run_at = await checked_rule(request, owner, rule)
    saved = await store.insert_rule(get_context(request).db, owner, rule, next_run_at)
    await runner_of(request).rules_changed(next_run_at)
    return web.json_response({"success": True, "rule": saved}, status=201)


@routes.get("/api/v1/automation/rules/{rule_id}", name="automation.get_rule")
@api_doc("One automation rule", query=OwnerQuery, responses={200: RuleAnswer}, errors=(404, 503), path={"rule_id": ID_PATH})
async def get_rule(request: web.Request) -> web.Response:
    user = await require_user(request)
    return web.json_response({"rule": await rule_for(request, user, requested_owner(request))})


@routes.put("/api/v1/automation/rules/{rule_id}", name="automation.update_rule")
@api_doc("Change some of a rule's fields; the others stay", body=RuleUpdate, query=OwnerQuery,
         responses={200: RuleSaved}, errors=(403, 404, 503), path={"rule_id": ID_PATH})
async def update_rule(request: web.Request) -> web.Response:
    user = await require_user(request)
    body = await parse_body(request, RuleUpdate())
    rule = await rule_for(request, user, requested_owner(request, body))
    changes = {key: body[key] for key in store.RULE_FIELDS if key in body}
    if "name" in changes:
        changes["name"] = changes["name"].strip()
    for key in ("trigger_config", "conditions"):
        if key in changes and changes[key] is None:
            changes[key] = {}
    next_run_at = await checked_rule(request, rule["user_id"], {**rule, **changes}, previous=rule)
    saved = await store.update_rule(get_context(request).db, rule["id"], changes, next_run_at)
    if saved is None:
        raise not_found("rule")
    await runner_of(request).rules_changed(next_run_at)
    return web.json_response({"success": True, "rule": saved})


@routes.delete("/api/v1/automation/rules/{rule_id}", name="automation.delete_rule")
@api_doc("Delete a rule (scenes keep their other rules; its run log goes with it)", query=OwnerQuery,
         responses={200: Succeeded}, errors=(404, 503), path={"rule_id": ID_PATH})
async def delete_rule(request: web.Request) -> web.Response:
    user = await require_user(request)
    rule = await rule_for(request, user, requested_owner(request))
    await store.delete_rule(get_context(request).db, rule["id"])
    return web.json_response({"success": True})


@routes.post("/api/v1/automation/rules/{rule_id}/trigger", name="automation.trigger_rule")
@api_doc("Run a rule's actions now (its trigger and conditions aside) and say what each did", query=OwnerQuery,
         responses={200: RunAnswer}, errors=(404, 503), path={"rule_id": ID_PATH}, body_required=False)
async def trigger_rule(request: web.Request) -> web.Response:
    user = await require_user(request)
    rule = await rule_for(request, user, requested_owner(request))
    run = await runner_of(request).run_rule(rule, "manual", {"by": user.user_id}, check_conditions=False)
    return web.json_response({"success": True, "message": summary(run, f"Rule {rule['name']!r}"),
                              "results": run["results"], "run": run})


@routes.get("/api/v1/automation/rules/{rule_id}/runs", name="automation.rule_runs")
@api_doc("A rule's run log, newest first: what fired it and what each action did", query=RunsQuery,
         responses={200: RunList}, errors=(404, 503), path={"rule_id": ID_PATH})
async def rule_runs(request: web.Request) -> web.Response:
    user = await require_user(request)
    query = parse_query(request, RunsQuery())
    rule = await rule_for(request, user, query["user_id"])
    runs, total = await store.list_runs(get_context(request).db, "rule_id", rule["id"], query["limit"],
                                        query["offset"])
    return web.json_response({"runs": runs, "count": len(runs), "total": total})


# ---------------------------------------------------------------- scenes

async def checked_scene(request: web.Request, owner: str, scene: dict) -> dict:
    actions = check_actions(scene["actions"], allow_empty=True)
    check_assistant_allowed(request, owner, actions)
    await check_owned_scenes(request, owner, actions)
    rule_ids = list(dict.fromkeys(scene["rule_ids"]))
    owned = await store.owned_rule_ids(get_context(request).db, owner, rule_ids)
    missing = [rule_id for rule_id in rule_ids if rule_id not in owned]
    if missing:
        raise BadRequest(f"Invalid rule_ids: no rule {', '.join(missing)} of yours.", error_type="unknown_rule",
                         hint="List your rules with GET /api/v1/automation/rules.")
    return {**scene, "rule_ids": rule_ids, "actions": actions}


@routes.get("/api/v1/automation/scenes", name="automation.list_scenes")
@api_doc("The caller's scenes, oldest first", query=OwnerQuery, responses={200: SceneList}, errors=(503,))
async def list_scenes(request: web.Request) -> web.Response:
    user = await require_user(request)
    owner = owner_for(user, requested_owner(request))
    scenes = await store.list_scenes(get_context(request).db, owner)
    return web.json_response({"scenes": scenes, "count": len(scenes)})


@routes.post("/api/v1/automation/scenes", name="automation.create_scene")
@api_doc("Create a scene: a name, an icon, some of the caller's rules and its own actions", body=SceneCreate,
         query=OwnerQuery, responses={201: SceneSaved}, errors=(403, 503))
async def create_scene(request: web.Request) -> web.Response:
    user = await require_user(request)
    body = await parse_body(request, SceneCreate())
    owner = owner_for(user, requested_owner(request, body))
    scene = await checked_scene(request, owner, {"name": body["name"].strip(), "icon": body["icon"],
                                                 "rule_ids": body["rule_ids"], "actions": body["actions"]})
    saved = await store.insert_scene(get_context(request).db, owner, scene)
    return web.json_response({"success": True, "scene": saved}, status=201)


@routes.get("/api/v1/automation/scenes/{scene_id}", name="automation.get_scene")
@api_doc("One scene", query=OwnerQuery, responses={200: SceneAnswer}, errors=(404, 503), path={"scene_id": ID_PATH})
async def get_scene(request: web.Request) -> web.Response:
    user = await require_user(request)
    return web.json_response({"scene": await scene_for(request, user, requested_owner(request))})


@routes.put("/api/v1/automation/scenes/{scene_id}", name="automation.update_scene")
@api_doc("Change some of a scene's fields; the others stay", body=SceneUpdate, query=OwnerQuery,
         responses={200: SceneSaved}, errors=(403, 404, 503), path={"scene_id": ID_PATH})
async def update_scene(request: web.Request) -> web.Response:
    user = await require_user(request)
    body = await parse_body(request, SceneUpdate())
    scene = await scene_for(request, user, requested_owner(request, body))
    changes = {key: body[key] for key in store.SCENE_FIELDS if key in body}
    if "name" in changes:
        changes["name"] = changes["name"].strip()
    merged = await checked_scene(request, scene["user_id"], {**scene, **changes})
    changes = {key: merged[key] for key in changes}
    saved = await store.update_scene(get_context(request).db, scene["id"], changes)
    if saved is None:
        raise not_found("scene")
    return web.json_response({"success": True, "scene": saved})


@routes.delete("/api/v1/automation/scenes/{scene_id}", name="automation.delete_scene")
@api_doc("Delete a scene (its rules stay)", query=OwnerQuery, responses={200: Succeeded}, errors=(404, 503),
         path={"scene_id": ID_PATH})
async def delete_scene(request: web.Request) -> web.Response:
    user = await require_user(request)
    scene = await scene_for(request, user, requested_owner(request))
    await store.delete_scene(get_context(request).db, scene["id"])
    return web.json_response({"success": True})


@routes.post("/api/v1/automation/scenes/{scene_id}/execute", name="automation.execute_scene")
@api_doc("Run a scene now: its own actions, then its rules' actions, in order; say what each did",
         query=OwnerQuery, responses={200: RunAnswer}, errors=(404, 503), path={"scene_id": ID_PATH},
         body_required=False)
async def execute_scene(request: web.Request) -> web.Response:
    user = await require_user(request)
    scene = await scene_for(request, user, requested_owner(request))
    run = await runner_of(request).run_scene(scene, "scene", {"by": user.user_id})
    return web.json_response({"success": True, "message": summary(run, f"Scene {scene['name']!r}"),
                              "results": run["results"], "run": run})


@routes.get("/api/v1/automation/scenes/{scene_id}/runs", name="automation.scene_runs")
@api_doc("A scene's run log, newest first", query=RunsQuery, responses={200: RunList}, errors=(404, 503),
         path={"scene_id": ID_PATH})
async def scene_runs(request: web.Request) -> web.Response:
    user = await require_user(request)
    query = parse_query(request, RunsQuery())
    scene = await scene_for(request, user, query["user_id"])
    runs, total = await store.list_runs(get_context(request).db, "scene_id", scene["id"], query["limit"],
                                        query["offset"])
    return web.json_response({"runs": runs, "count": len(runs), "total": total})


# ---------------------------------------------------------------- named events

async def event_owner(request: web.Request) -> str:
    """A person's bearer token (their own events; the administrator's may name `user_id`), or
    the operator's webhook key naming the user in `user_id`."""
    query = parse_query(request, EventQuery())
    keys = get_context(request).contracts.get(WEBHOOK_KEY)
    if keys is not None and keys.present(request) and await current_identity(request) is None:
        keys.check(request)
        if not query["user_id"]:
            raise BadRequest("Name the user whose rules the event is for.", error_type="validation_error",
                             hint="With X-Webhook-Key, pass ?user_id=<the person's user id>.")
        return str(query["user_id"])
    user = await require_user(request)
    return owner_for(user, query["user_id"])


@routes.post("/api/v1/automation/events/{event}", name="automation.fire_event")
@api_doc("Fire a named event: every enabled rule of the person with an `event` trigger of that name runs "
         "(conditions checked)", query=EventQuery, responses={200: EventAnswer}, errors=(503,),
         path={"event": EVENT_PATH}, body_required=False,
         headers={"X-Webhook-Key": "Instead of a bearer token: the operator's WEBHOOK_KEY (then user_id is required)."},
         description="The optional JSON body is the event's payload, kept in each run's trigger_detail.")
async def fire_event(request: web.Request) -> web.Response:
    owner = await event_owner(request)
    name = request.match_info["event"]
    load(EventTrigger(), {"event": name}, "path")
    payload = await read_json(request, allow_empty=True)
    if len(json.dumps(payload)) > MAX_EVENT_PAYLOAD:
        raise BadRequest(f"The event payload is larger than {MAX_EVENT_PAYLOAD} bytes.", error_type="payload_too_large",
                         hint="Send only what the rules need.")
    runs = await runner_of(request).fire_event(owner, name, payload if isinstance(payload, dict) else {"value": payload})
    ran = sum(1 for run in runs if run["status"] != "skipped")
    return web.json_response({"success": True, "event": name, "runs": runs,
                              "message": f"{len(runs)} rule{' listens' if len(runs) == 1 else 's listen'} for "
                                         f"{name!r}; {ran} ran."})

