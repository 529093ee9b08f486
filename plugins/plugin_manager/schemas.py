"""The plugin manager's request and response bodies (docs/plugin-manager.md)."""
import marshmallow
from marshmallow import fields, validate

from gateway.introspection import RouteOut, SkippedPlugin

STATES = ("running", "down", "error")


class ImportFailure(marshmallow.Schema):
    type = fields.String(required=True, metadata={"description": "The exception's class, e.g. ModuleNotFoundError."})
    message = fields.String(required=True)


class ServiceReport(marshmallow.Schema):
    """What one service says of one plugin."""
    service = fields.String(required=True)
    state = fields.String(required=True, validate=validate.OneOf(STATES), metadata={
        "description": "`running`: it answered its introspection; `down`: it did not answer in time; "
                       "`error`: it answered with an error."})
    loaded = fields.Boolean(required=True, allow_none=True, metadata={
        "description": "Whether the running service loaded it; null when the service is not running."})
    reason = fields.String(required=True, allow_none=True, metadata={
        "description": "Why it is not loaded there (skipped: planned or disabled; or a restart pending)."})
    routes = fields.List(fields.Nested(RouteOut), required=True)
    ws_types = fields.List(fields.String(), required=True)
    ws_server_types = fields.List(fields.String(), required=True)
    jobs = fields.List(fields.String(), required=True)
    tools = fields.List(fields.String(), required=True, metadata={"description": "AI tools it added."})
    migrations = fields.List(fields.String(), required=True, metadata={"description": "Applied, `NNN_name`."})
    provides = fields.List(fields.String(), required=True)
    reported = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), required=True)


class InstalledPluginOut(marshmallow.Schema):
    name = fields.String(required=True)
    distribution = fields.String(required=True)
    version = fields.String(required=True)
    description = fields.String(required=True)
    depends = fields.List(fields.String(), required=True)
    optional_depends = fields.List(fields.String(), required=True)
    enabled = fields.Boolean(required=True, metadata={"description": "Whether `[plugins.<name>] enabled` allows it."})
    services = fields.List(fields.String(), required=True, metadata={
        "description": "The services configured to load it: the service table with DATA_DIR/service-plugins.toml."})
    error = fields.Nested(ImportFailure, required=True, allow_none=True, metadata={
        "description": "Why it could not be imported, or null."})
    service_reports = fields.List(fields.Nested(ServiceReport), required=True, metadata={
        "description": "Each configured service, and any running service that loaded it."})


class ServiceOut(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    url = fields.String(required=True)
    state = fields.String(required=True, validate=validate.OneOf(STATES))
    error = fields.String(required=True, allow_none=True)
    plugins = fields.List(fields.String(), required=True, metadata={"description": "What it loaded, in setup order."})
    configured = fields.List(fields.String(), required=True, metadata={"description": "What its configuration names."})
    skipped = fields.List(fields.Nested(SkippedPlugin), required=True)


class PluginList(marshmallow.Schema):
    plugins = fields.List(fields.Nested(InstalledPluginOut), required=True)
    services = fields.List(fields.Nested(ServiceOut), required=True)
    configuration = fields.String(required=True, metadata={
        "description": "The file enabling and disabling writes (DATA_DIR/service-plugins.toml)."})


class PluginChange(marshmallow.Schema):
    service = fields.String(required=True, validate=validate.Length(min=1, max=100), metadata={
        "description": "A service id of the service table."})


class Restart(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.OneOf(
        ("restarted", "requested", "pending", "failed", "not_needed")), metadata={
        "description": "`restarted` by the console; `requested` (the manager's own service: it restarts after "
                       "answering); `pending`: the console does not answer, the change applies at the next start; "
                       "`failed`: the console answered an error; `not_needed`: nothing changed."})
    detail = fields.String(required=True)


class PluginChanged(marshmallow.Schema):
    plugin = fields.String(required=True)
    service = fields.String(required=True)
    enabled = fields.Boolean(required=True, metadata={"description": "Whether the service now loads it."})
    changed = fields.Boolean(required=True)
    plugins = fields.List(fields.String(), required=True, metadata={"description": "The service's plugins now."})
    configuration = fields.String(required=True)
    restart = fields.Nested(Restart, required=True)
