"""`[plugins.automation]`."""
from __future__ import annotations

from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting


@dataclass(frozen=True, kw_only=True)
class AutomationSettings(PluginSettings):
    grace_seconds: float = setting(fields.Float(load_default=300.0, validate=validate.Range(min=0), metadata={
        "description": "A time rule found due later than this (the gateway was down) is skipped and recorded "
                       "in its run log instead of fired; within it, it fires late and says so."}))
    poll_interval: float = setting(fields.Float(load_default=30.0, validate=validate.Range(min=0.05, max=3600), metadata={
        "description": "Seconds between looks at the due time rules when nothing announced an earlier one."}))
    http_timeout: float = setting(fields.Float(load_default=10.0, validate=validate.Range(min=0.1, max=120), metadata={
        "description": "Seconds an `http` action waits for the outside URL (through the guarded fetcher, "
                       "`http_hosts` allows private addresses for it alone)."}))
    http_hosts: list[str] = setting(fields.List(fields.String(), load_default=list, metadata={
        "description": "Loopback or private addresses automation's `http` actions may reach, for them only "
                       "(docs/automation.md), e.g. a home server on this network: [\"192.168.1.20:8123\"], "
                       "[\"homeassistant.lan\"]. Formerly `[fetch] automation_hosts`, still read there."}))
    runs_kept: int = setting(fields.Integer(load_default=200, validate=validate.Range(min=1, max=100000), metadata={
        "description": "Runs kept in the log of each rule and of each scene (the oldest are pruned)."}))
    assistant_timeout: float = setting(fields.Float(load_default=120.0, validate=validate.Range(min=1, max=900), metadata={
        "description": "Seconds an `assistant` action waits for the assistant's reply."}))
