"""Web Push: a reminder reaches a browser with no page open. The gateway (auth, notifications,
reminders, the scheduler's manual clock) pushes to a local push service speaking RFC 8030
(tests/support/fake_push.py), which checks the VAPID header and decrypts each payload with the
browser's own keys, as a browser would."""
import os
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from gateway.context import get_context
from gateway.database import fetch_value
from plugins.notifications import webpush
from tests.notifications.devices import until
from tests.support.fake_push import b64, decrypt, serve_fake_push, unb64

# RFC 8291 Appendix A.
RFC_PLAINTEXT = b"When I grow up, I want to be a watermelon"
RFC_AS_PRIVATE = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
RFC_AS_PUBLIC = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
RFC_UA_PRIVATE = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
RFC_UA_PUBLIC = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
RFC_AUTH = "BTBZMqHH6r4Tts7J_aSIgg"
RFC_SALT = "DGv6ra1nlYgDCS1FRnbzlw"
RFC_BODY = ("DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEq"
            "KK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")


def _private(text: str) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(unb64(text), "big"), ec.SECP256R1())


def test_the_test_push_service_decrypts_rfc8291_appendix_a():
    """The push service's decryption, checked against the RFC's worked example."""
    ua = _private(RFC_UA_PRIVATE)
    assert b64(webpush.public_key_bytes(ua)) == RFC_UA_PUBLIC
    assert decrypt(unb64(RFC_BODY), ua, unb64(RFC_AUTH)) == RFC_PLAINTEXT


def test_the_gateway_encrypts_rfc8291_appendix_a_byte_for_byte():
    sender = _private(RFC_AS_PRIVATE)
    assert b64(webpush.public_key_bytes(sender)) == RFC_AS_PUBLIC
    body = webpush.encrypt(RFC_PLAINTEXT, unb64(RFC_UA_PUBLIC), unb64(RFC_AUTH), salt=unb64(RFC_SALT),
                           sender_key=sender)
    assert b64(body) == RFC_BODY


def test_a_payload_too_long_for_one_record_is_shortened_to_fit():
    payload = webpush.fit_payload({"id": "x", "title": "T" * 300, "body": "长" * 5000, "data": {"k": "v" * 3000}})
    assert len(payload) <= webpush.MAX_PAYLOAD_BYTES
    browser, auth = ec.generate_private_key(ec.SECP256R1()), os.urandom(16)
    body = webpush.encrypt(payload, webpush.public_key_bytes(browser), auth)
    assert len(body) <= webpush.RECORD_SIZE
    assert decrypt(body, browser, auth) == payload


@pytest.fixture
async def push_service(aiohttp_server):
    return await serve_fake_push(aiohttp_server)


PUSH = {"plugins.notifications.push_hosts": ["127.0.0.1"],
        "plugins.notifications": {"push_retry_delay": 0.05, "platform_types": []}}


@pytest.fixture
async def pushing(make_gateway, push_service):
    gateway = await make_gateway(overrides=PUSH)
    key = (await gateway.call("GET", "/notifications/push/key"))["publicKey"]
    push_service.vapid_key = key
    return gateway


async def subscribe(gateway, push_service, who="alice", device_name="Phone") -> tuple[dict, dict]:
    subscription = push_service.subscribe()
    saved = await gateway.call("POST", "/notifications/push/subscriptions", who, 201,
                               json={**subscription, "device_name": device_name})
    return subscription, saved["subscription"]


async def test_the_vapid_key_is_made_once_into_data_dir_readable_by_the_owner_only(make_gateway, make_config):
    first = await make_gateway(overrides=PUSH)
    key = (await first.call("GET", "/notifications/push/key"))["publicKey"]
    assert len(unb64(key)) == 65 and unb64(key)[0] == 4
    path = get_context(first.app).config.data_dir / webpush.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    second = await make_gateway(overrides=PUSH)  # the same DATA_DIR: the same key
    assert (await second.call("GET", "/notifications/push/key"))["publicKey"] == key
    await first.error("GET", "/notifications/push/key", 401, "unauthorized", headers={"Authorization": ""})


async def test_a_fired_reminder_is_pushed_to_each_subscribed_browser_decryptable_by_it(pushing, push_service):
    phone, saved_phone = await subscribe(pushing, push_service, device_name="Phone")
    laptop, _ = await subscribe(pushing, push_service, device_name="Laptop")
    bobs, _ = await subscribe(pushing, push_service, "bob")
    listed = await pushing.call("GET", "/notifications/push/subscriptions")
    assert [s["device_name"] for s in listed["subscriptions"]] == ["Phone", "Laptop"]
    assert listed["subscriptions"][0] == saved_phone and saved_phone["endpoint_origin"] == push_service.url
    reminder = await pushing.create(title="Take the pizza out", description="At 200 degrees",
                                    remind_at="2026-11-24T14:00:30+08:00")
    pushing.clock.advance(30)

    async def both_arrived() -> bool:
        return len(push_service.received) >= 2
    await until(both_arrived, timeout=10)
    assert push_service.refused == []
    for subscription in (phone, laptop):
        [payload] = push_service.payloads(subscription)
        assert payload["title"] == "Take the pizza out" and payload["body"] == "At 200 degrees"
        assert payload["type"] == "reminder" and payload["data"]["reminder_id"] == reminder["id"]
    assert push_service.payloads(bobs) == []
    received = push_service.received[0]
    assert received.headers["Urgency"] == "high" and received.headers["TTL"] == "86400"
    assert received.claims["aud"] == push_service.url and received.claims["sub"] == "mailto:admin@localhost"

    async def recorded() -> bool:
        rows = (await pushing.call("GET", "/notifications/push/subscriptions"))["subscriptions"]
        return all(row["last_push_at"] for row in rows)
    await until(recorded)


async def test_a_subscription_the_push_service_says_is_gone_is_forgotten(pushing, push_service):
    gone, _ = await subscribe(pushing, push_service)
    kept, saved_kept = await subscribe(pushing, push_service)
    push_service.answer(gone, 410)
    await pushing.create(title="Stretch", remind_at="2026-11-24T14:00:10+08:00")
    pushing.clock.advance(10)

    async def forgotten() -> bool:
        rows = (await pushing.call("GET", "/notifications/push/subscriptions"))["subscriptions"]
        return [row["id"] for row in rows] == [saved_kept["id"]]
    await until(forgotten)
    await until(lambda: _true_when(len(push_service.payloads(kept)) == 1))
    assert push_service.payloads(gone) == []


async def _true_when(condition: bool) -> bool:
    return condition


async def test_a_busy_push_service_is_tried_again_until_it_takes_the_push(pushing, push_service):
    subscription, _ = await subscribe(pushing, push_service)
    push_service.answer(subscription, 503)
    push_service.answer(subscription, 429, {"Retry-After": "0"})
    await pushing.create(title="Water the plants", remind_at="2026-11-24T14:00:10+08:00")
    pushing.clock.advance(10)
    await until(lambda: _true_when(len(push_service.payloads(subscription)) == 1))
    assert len(push_service.attempts) == 3
    assert push_service.payloads(subscription)[0]["title"] == "Water the plants"


async def test_a_push_service_always_failing_is_given_up_after_the_tries_allowed(pushing, push_service):
    subscription, saved = await subscribe(pushing, push_service)
    for _ in range(4):
        push_service.answer(subscription, 500)
    await pushing.create(title="Never arrives", remind_at="2026-11-24T14:00:10+08:00")
    pushing.clock.advance(10)

    async def given_up() -> bool:
        rows = (await pushing.call("GET", "/notifications/push/subscriptions"))["subscriptions"]
        return bool(rows[0]["last_error"])
    await until(given_up)
    assert len(push_service.attempts) == 4  # push_attempts
    rows = (await pushing.call("GET", "/notifications/push/subscriptions"))["subscriptions"]
    assert "answered 500" in rows[0]["last_error"] and rows[0]["id"] == saved["id"]


async def test_subscriptions_are_validated_and_belong_to_their_person(pushing, push_service):
    good = push_service.subscribe()
    cases = [
        ({**good, "endpoint": "ftp://push.example.com/x"}, "endpoint"),
        ({**good, "endpoint": "https://[::1/x"}, "endpoint"),
        ({**good, "endpoint": "https://push.example.com:99999/x"}, "endpoint"),
        ({**good, "endpoint": "http://push.example.com/x"}, "endpoint"),  # http: only for push_hosts
        ({**good, "endpoint": "https://169.254.169.254/x"}, "endpoint"),
        ({**good, "keys": {**good["keys"], "p256dh": b64(b"\x04" + b"\x01" * 64)}}, "keys.p256dh"),
        ({**good, "keys": {**good["keys"], "p256dh": "not base64 !"}}, "keys.p256dh"),
        ({**good, "keys": {**good["keys"], "auth": b64(b"short")}}, "keys.auth"),
    ]
    for body, field in cases:
        answer = await pushing.error("POST", "/notifications/push/subscriptions", 400, "validation_error", json=body)
        assert field in answer["fields"], answer
    answer = await pushing.error("POST", "/notifications/push/subscriptions", 400, "validation_error",
                                 json={"endpoint": good["endpoint"]})
    assert "keys" in answer["fields"]
    saved = (await pushing.call("POST", "/notifications/push/subscriptions", json=good, status=201))["subscription"]
    # The same browser subscribing again (another person signed in there) moves it to them.
    again = (await pushing.call("POST", "/notifications/push/subscriptions", "bob", json=good))["subscription"]
    assert again["id"] == saved["id"]
    assert (await pushing.call("GET", "/notifications/push/subscriptions"))["count"] == 0
    await pushing.error("DELETE", f"/notifications/push/subscriptions/{saved['id']}", 404, "subscription_not_found")
    await pushing.error("DELETE", "/notifications/push/subscriptions/nonsense", 404, "subscription_not_found")
    await pushing.call("DELETE", f"/notifications/push/subscriptions/{saved['id']}", "bob")
    assert (await pushing.call("GET", "/notifications/push/subscriptions", "bob"))["count"] == 0


async def test_a_person_keeps_at_most_the_subscriptions_allowed_forgetting_the_oldest(make_gateway, push_service):
    gateway = await make_gateway(overrides={**PUSH, "plugins.notifications": {
        **PUSH["plugins.notifications"], "push_max_subscriptions": 2}})
    ids = []
    for _ in range(3):
        ids.append((await gateway.call("POST", "/notifications/push/subscriptions", status=201,
                                       json=push_service.subscribe()))["subscription"]["id"])
    listed = await gateway.call("GET", "/notifications/push/subscriptions")
    assert [s["id"] for s in listed["subscriptions"]] == ids[1:]
    assert await fetch_value(get_context(gateway.app).db, "SELECT count(*) FROM push_subscriptions") == 2


async def test_a_vapid_key_file_that_cannot_be_used_is_a_clear_503(make_gateway):
    gateway = await make_gateway(overrides=PUSH)
    path = get_context(gateway.app).config.data_dir / webpush.KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a key")
    answer = await gateway.error("GET", "/notifications/push/key", 503, "push_unavailable")
    assert webpush.KEY_FILE in answer["hint"]
