"""`[plugins.auth]`: accounts and sign-in settings (docs/configuration.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting

from .passwords import DEFAULT_ROUNDS

ONE_SECOND_TO_AN_HOUR = validate.Range(min=1, max=3600)


@dataclass(frozen=True, kw_only=True)
class AuthSettings(PluginSettings):
    trusted_proxies: list[str] = setting(fields.List(fields.String(), load_default=list, metadata={
        "description": "Reverse proxies (addresses or CIDR ranges) whose X-Forwarded-For is read."}))
    bcrypt_rounds: int = setting(fields.Integer(load_default=DEFAULT_ROUNDS, validate=validate.Range(min=4, max=31), metadata={
        "description": "bcrypt cost of stored passwords."}))
    rate_limit_per_minute: int = setting(fields.Integer(load_default=5, validate=validate.Range(min=1), metadata={
        "description": "Sign-in and registration attempts per client address per minute."}))
    account_free_failures: int = setting(fields.Integer(load_default=5, validate=validate.Range(min=1), metadata={
        "description": "Failed logins one account may have (from anywhere) within account_window_seconds "
                       "before each address must wait between its attempts on that account."}))
    account_window_seconds: int = setting(fields.Integer(load_default=900, validate=validate.Range(min=60), metadata={
        "description": "How long an account's failed logins are counted, from the first of them."}))
    account_max_delay_seconds: int = setting(fields.Integer(load_default=120, validate=ONE_SECOND_TO_AN_HOUR, metadata={
        "description": "Longest wait between an address's attempts on an account with many failed logins "
                       "(the wait doubles from 1 second with each failure beyond account_free_failures)."}))
    admin_nickname: str = setting(fields.String(load_default="Administrator", metadata={
        "description": "The administrator's nickname."}))
    default_timezone: str = setting(fields.String(load_default="", metadata={
        "description": "IANA time zone (e.g. \"Europe/Berlin\") of people who have not chosen their own "
                       "(PUT /api/v1/profile); empty: this machine's zone (TZ, /etc/localtime), else UTC."}))
    people_may_be_admins: bool = setting(fields.Boolean(load_default=False, metadata={
        "description": "Whether the administrator may make people administrators too "
                       "(PATCH /api/v1/admin/users/{id} with is_admin); false: only the configured one."}))
    invitation_hours: int = setting(fields.Integer(load_default=72, validate=validate.Range(min=1, max=24 * 90), metadata={
        "description": "How long an invitation link (a new person's, or a password reset's) works."}))
