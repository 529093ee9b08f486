"""`[plugins.auth]`: accounts and sign-in settings (docs/configuration.md)."""
from marshmallow import fields, validate

from gateway.plugins import PluginSettings

from .passwords import DEFAULT_ROUNDS


class AuthSettings(PluginSettings):
    trusted_proxies = fields.List(fields.String(), load_default=list, metadata={
        "description": "Reverse proxies (addresses or CIDR ranges) whose X-Forwarded-For is read."})
    bcrypt_rounds = fields.Integer(load_default=DEFAULT_ROUNDS, validate=validate.Range(min=4, max=31), metadata={
        "description": "bcrypt cost of stored passwords."})
    rate_limit_per_minute = fields.Integer(load_default=5, validate=validate.Range(min=1), metadata={
        "description": "Sign-in and registration attempts per client address per minute."})
    admin_nickname = fields.String(load_default="Administrator", metadata={
        "description": "The administrator's nickname."})
    default_timezone = fields.String(load_default="", metadata={
        "description": "IANA time zone (e.g. \"Europe/Berlin\") of people who have not chosen their own "
                       "(PUT /api/v1/profile); empty: this machine's zone (TZ, /etc/localtime), else UTC."})
