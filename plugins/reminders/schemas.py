"""The reminders plugin's settings, request schemas and answers."""
from __future__ import annotations

from dataclasses import dataclass

import marshmallow
from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting
from gateway.schedule import REPEAT_KINDS
from gateway.validation import MAX_OFFSET

SETTABLE_STATUSES = ("pending", "completed", "cancelled")
# `failed`: set by the scheduler only, on a reminder whose occurrence could not be fired
# (docs/reminders.md "When a reminder cannot fire").
STATUSES = (*SETTABLE_STATUSES, "failed")
MAX_PAGE = 200
TITLE = validate.Length(min=1, max=200)
DESCRIPTION = validate.Length(max=2000)
ID_PATH = {"reminder_id": {"type": "string", "maxLength": 64}}


@dataclass(frozen=True, kw_only=True)
class ReminderSettings(PluginSettings):
    grace_seconds: int = setting(fields.Integer(load_default=3600, validate=validate.Range(min=0), metadata={
        "description": "How late a reminder may still fire (after the gateway was down): it fires saying how late; "
                       "an older one is skipped, recorded, and a repeat moves on to its next occurrence."}))
    check_interval: float = setting(fields.Float(load_default=60.0, validate=validate.Range(min=0.05), metadata={
        "description": "Longest sleep of the scheduler between looks at the table, in seconds (it also wakes at "
                       "each due time and whenever an instance saves a reminder due sooner)."}))
    max_pending: int = setting(fields.Integer(load_default=1000, validate=validate.Range(min=1), metadata={
        "description": "Most pending reminders one person may keep."}))


class ReminderBody(marshmallow.Schema):
    """POST: title and remind_at required. PUT: any of these."""
    title = fields.String(required=True, validate=TITLE)
    description = fields.String(load_default="", validate=DESCRIPTION)
    remind_at = fields.String(required=True, validate=validate.Length(min=1, max=64), metadata={
        "description": "ISO 8601 with a time: with an offset (`2026-11-25T09:00:00+08:00`, `...Z`), or without one "
                       "in the reminder's `timezone` (`2026-11-25T09:00`)."})
    repeat_type = fields.String(load_default="none", validate=validate.OneOf(REPEAT_KINDS), metadata={
        "description": "none, daily, weekly, monthly; extensions: weekdays (Monday to Friday) and cron "
                       "(`repeat_rule`)."})
    repeat_rule = fields.String(load_default="", validate=validate.Length(max=100), metadata={
        "description": "The five-field cron expression of repeat_type cron, read on the clocks of `timezone`."})
    session_id = fields.String(load_default="", validate=validate.Length(max=128))
    timezone = fields.String(load_default=None, validate=validate.Length(min=1, max=64), metadata={
        "description": "IANA zone of this reminder (default: the person's, from their profile)."})


class ReminderUpdate(marshmallow.Schema):
    title = fields.String(validate=TITLE)
    description = fields.String(validate=DESCRIPTION)
    remind_at = fields.String(validate=validate.Length(min=1, max=64))
    repeat_type = fields.String(validate=validate.OneOf(REPEAT_KINDS))
    repeat_rule = fields.String(validate=validate.Length(max=100))
    session_id = fields.String(validate=validate.Length(max=128))
    timezone = fields.String(validate=validate.Length(min=1, max=64))
    status = fields.String(validate=validate.OneOf(SETTABLE_STATUSES), metadata={
        "description": "completed or cancelled writes completed_at; pending reopens it (a failed one too)."})
    snooze = fields.Boolean(load_default=False, metadata={
        "description": "With remind_at on a repeating reminder: move this occurrence only; the series keeps its "
                       "day and time."})


class OwnerQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
        "description": "Whose reminders (the administrator and services only)."})


class ListQuery(OwnerQuery):
    status = fields.String(load_default=None, validate=validate.OneOf(STATUSES))
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=MAX_PAGE))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))


class Reminder(marshmallow.Schema):
    id = fields.String(required=True, metadata={"description": "32 hex characters."})
    user_id = fields.String(required=True)
    title = fields.String(required=True)
    description = fields.String(required=True)
    remind_at = fields.String(required=True, metadata={
        "description": "ISO 8601 with the offset of the reminder's zone: its next (or last) occurrence."})
    status = fields.String(required=True, validate=validate.OneOf(STATUSES), metadata={
        "description": "pending, completed, cancelled; extension: failed (the scheduler could not fire it)."})
    repeat_type = fields.String(required=True, validate=validate.OneOf(REPEAT_KINDS))
    repeat_rule = fields.String(required=True)
    timezone = fields.String(required=True)
    session_id = fields.String(required=True)
    notified = fields.Boolean(required=True, metadata={"description": "Whether this occurrence has fired."})
    next_run_at = fields.String(required=True, allow_none=True, metadata={
        "description": "RFC 3339: when the scheduler fires it next; null when nothing is to fire."})
    last_fired_at = fields.String(required=True, allow_none=True)
    created_at = fields.String(required=True)
    updated_at = fields.String(required=True)
    completed_at = fields.String(required=True, allow_none=True)


class ReminderPage(marshmallow.Schema):
    reminders = fields.List(fields.Nested(Reminder), required=True)
    count = fields.Integer(required=True, metadata={"description": "How many on this page."})
    total = fields.Integer(required=True, metadata={"description": "How many match, on every page."})
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)


class Saved(marshmallow.Schema):
    success = fields.Boolean(required=True)
    reminder = fields.Nested(Reminder, required=True)


class OneReminder(marshmallow.Schema):
    reminder = fields.Nested(Reminder, required=True)


class Deleted(marshmallow.Schema):
    success = fields.Boolean(required=True)


class Occurrence(marshmallow.Schema):
    due_at = fields.String(required=True)
    handled_at = fields.String(required=True)
    outcome = fields.String(required=True, validate=validate.OneOf(("fired", "fired_late", "skipped")))
    late_by_seconds = fields.Integer(required=True)
    notification_id = fields.String(required=True, allow_none=True)


class Occurrences(marshmallow.Schema):
    occurrences = fields.List(fields.Nested(Occurrence), required=True)
    count = fields.Integer(required=True)
