"""The automation endpoints' request and response bodies (spec: "Automation rule", "Scene", the
Automation table). What a trigger, condition or action may hold is in definitions.py."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

ID_PATH = {"type": "string", "pattern": "^[0-9a-f]{32}$"}
EVENT_PATH = {"type": "string", "pattern": r"^[A-Za-z0-9_.\-]{1,64}$"}


def _name(required: bool) -> fields.String:
    return fields.String(required=required, validate=[validate.Length(min=1, max=200),
                                                      validate.Regexp(r"\S", error="a name needs a letter")])


class OwnerQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
        "description": "The administrator acts on this user's rules and scenes."})


class RunsQuery(OwnerQuery):
    limit = fields.Integer(load_default=20, validate=validate.Range(min=1, max=200))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=10**9))


class RuleCreate(marshmallow.Schema):
    name = _name(True)
    description = fields.String(load_default="", validate=validate.Length(max=2000))
    trigger_type = fields.String(required=True, validate=validate.Length(min=1, max=64), metadata={
        "description": "time, device_state, event or manual (docs/automation.md)."})
    trigger_config = fields.Dict(keys=fields.String(), load_default=dict, allow_none=True)
    conditions = fields.Raw(load_default=dict, allow_none=True, metadata={
        "description": "{} for none, one condition object (time_window, device_state, all, any), or a list (all)."})
    actions = fields.Raw(required=True, metadata={
        "description": "A list of action objects (or one action object): notify, device, message, scene, http, "
                       "assistant."})
    enabled = fields.Boolean(load_default=True)
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
        "description": "The administrator creates the rule for this user."})


class RuleUpdate(marshmallow.Schema):
    """Any of a rule's fields; what is left out stays as it was."""
    name = _name(False)
    description = fields.String(validate=validate.Length(max=2000))
    trigger_type = fields.String(validate=validate.Length(min=1, max=64))
    trigger_config = fields.Dict(keys=fields.String(), allow_none=True)
    conditions = fields.Raw(allow_none=True)
    actions = fields.Raw()
    enabled = fields.Boolean()
    user_id = fields.String(validate=validate.Length(min=1, max=128))


class Rule(marshmallow.Schema):
    id = fields.String(required=True, metadata={"description": "32 hex characters."})
    user_id = fields.String(required=True)
    name = fields.String(required=True)
    description = fields.String(required=True)
    trigger_type = fields.String(required=True)
    trigger_config = fields.Dict(required=True)
    conditions = fields.Raw(required=True, metadata={"description": "As saved: an object (or a list)."})
    actions = fields.Raw(required=True, metadata={"description": "As saved: a list of actions (or one action)."})
    enabled = fields.Boolean(required=True)
    created_at = fields.String(required=True, metadata={"description": "RFC 3339."})
    updated_at = fields.String(required=True, metadata={"description": "RFC 3339."})
    next_run_at = fields.String(required=True, allow_none=True, metadata={
        "description": "Time triggers: when the rule is next due (RFC 3339, UTC); null otherwise or when done."})
    last_run_at = fields.String(required=True, allow_none=True)


class RuleList(marshmallow.Schema):
    rules = fields.List(fields.Nested(Rule), required=True)
    count = fields.Integer(required=True)


class RuleAnswer(marshmallow.Schema):
    rule = fields.Nested(Rule, required=True)


class RuleSaved(marshmallow.Schema):
    success = fields.Boolean(required=True)
    rule = fields.Nested(Rule, required=True)


class Succeeded(marshmallow.Schema):
    success = fields.Boolean(required=True)


class ActionResult(marshmallow.Schema):
    """What one action did. Some carry more: `notification_id`, `operation_id`, `message_id`,
    `status` and `response` (http), `reply` (assistant), `results` (scene), `rule_id`."""
    class Meta:
        unknown = marshmallow.INCLUDE

    type = fields.String(required=True)
    ok = fields.Boolean(required=True)
    detail = fields.String(metadata={"description": "What it did (when ok)."})
    error = fields.String(metadata={"description": "Why it failed (when not ok)."})


class Run(marshmallow.Schema):
    id = fields.Integer(required=True)
    user_id = fields.String(required=True)
    rule_id = fields.String(required=True, allow_none=True)
    scene_id = fields.String(required=True, allow_none=True)
    trigger = fields.String(required=True, metadata={
        "description": "time, device_state, event, manual (POST …/trigger) or scene."})
    trigger_detail = fields.Dict(required=True, metadata={
        "description": "What fired it: the due instant and lateness, the device change, the event's payload."})
    status = fields.String(required=True, validate=validate.OneOf(
        ("running", "succeeded", "partial", "failed", "skipped")))
    note = fields.String(required=True)
    results = fields.List(fields.Nested(ActionResult), required=True)
    started_at = fields.String(required=True)
    finished_at = fields.String(required=True, allow_none=True)


class RunAnswer(marshmallow.Schema):
    success = fields.Boolean(required=True)
    message = fields.String(required=True)
    results = fields.List(fields.Nested(ActionResult), required=True)
    run = fields.Nested(Run, required=True)


class RunList(marshmallow.Schema):
    runs = fields.List(fields.Nested(Run), required=True)
    count = fields.Integer(required=True)
    total = fields.Integer(required=True)


def _rule_id() -> fields.String:
    return fields.String(validate=validate.Regexp(r"^[0-9a-f]{32}\Z", error="a rule id is 32 hex digits"))


class SceneCreate(marshmallow.Schema):
    name = _name(True)
    icon = fields.String(load_default="", validate=validate.Length(max=64))
    rule_ids = fields.List(_rule_id(), load_default=list, validate=validate.Length(max=50))
    actions = fields.Raw(load_default=list, metadata={
        "description": "The scene's own actions, run before its rules' (same types as a rule's)."})
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128))


class SceneUpdate(marshmallow.Schema):
    name = _name(False)
    icon = fields.String(validate=validate.Length(max=64))
    rule_ids = fields.List(_rule_id(), validate=validate.Length(max=50))
    actions = fields.Raw()
    user_id = fields.String(validate=validate.Length(min=1, max=128))


class Scene(marshmallow.Schema):
    id = fields.String(required=True, metadata={"description": "32 hex characters."})
    user_id = fields.String(required=True)
    name = fields.String(required=True)
    icon = fields.String(required=True)
    rule_ids = fields.List(fields.String(), required=True)
    actions = fields.List(fields.Dict(), required=True)
    created_at = fields.String(required=True)
    updated_at = fields.String(required=True)


class SceneList(marshmallow.Schema):
    scenes = fields.List(fields.Nested(Scene), required=True)
    count = fields.Integer(required=True)


class SceneAnswer(marshmallow.Schema):
    scene = fields.Nested(Scene, required=True)


class SceneSaved(marshmallow.Schema):
    success = fields.Boolean(required=True)
    scene = fields.Nested(Scene, required=True)


class EventQuery(OwnerQuery):
    pass


class EventAnswer(marshmallow.Schema):
    success = fields.Boolean(required=True)
    event = fields.String(required=True)
    message = fields.String(required=True)
    runs = fields.List(fields.Nested(Run), required=True)
