"""Automation: rules (a trigger, conditions, actions) and scenes, run when their time comes, when
a device's state crosses a threshold, when an outside system fires a named event, or when a
person asks; each run written to a log. The `automation_tools` the assistant uses live beside it
in assistant.py.

See docs/automation.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar
from plugins.iot.contract import DEVICES

from . import person_data
from .api import RUNNER, routes
from .runner import Runner
from .settings import AutomationSettings


class AutomationPlugin(Plugin):
    name = "automation"
    depends = ("auth_tokens",)
    # Each feature a rule can use, when the service runs it; an action needing a missing one
    # fails in its run's results, and device-state triggers need `devices` to hear changes.
    # `auth` knows each person's time zone (PERSON_ZONES); without it, UTC.
    optional_depends = ("auth", "devices", "notifications", "sessions", "chat", "webhooks")
    uses = ("database",)
    settings_class = AutomationSettings
    description = "Automation rules and scenes: time, device-state, event and manual triggers"
    # Release 0.1.0 kept this list in the core's [fetch] section.
    former_settings = {"fetch.automation_hosts": "plugins.automation.http_hosts"}

    def setup(self, registrar: Registrar[AutomationSettings]) -> None:
        runner = Runner(registrar.context, registrar.settings)
        registrar.migrations("plugins.automation")
        registrar.app_state(RUNNER, runner)
        registrar.routes(routes)
        registrar.job("time_triggers", runner.time_loop)
        person_data.register(registrar)
        devices = registrar.context.contracts.get(DEVICES)
        if devices is not None:
            devices.on_change(runner.on_device_change)


plugin = AutomationPlugin()
