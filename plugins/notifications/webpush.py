"""Web Push's wire format, for the sender's side: the VAPID key pair and its `Authorization`
header (RFC 8292), and a payload encrypted for one subscription (RFC 8291, the `aes128gcm`
content coding of RFC 8188). Pure functions and a key file; no network."""
from __future__ import annotations

import base64
import json
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import jwt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

RECORD_SIZE = 4096
# The one record holds header (86) + payload + delimiter (1) + tag (16) within the 4096 bytes
# every push service must accept (RFC 8291 section 4).
HEADER_BYTES = 16 + 4 + 1 + 65
MAX_PAYLOAD_BYTES = RECORD_SIZE - HEADER_BYTES - 1 - 16
# A VAPID token is valid this long (RFC 8292 says at most 24 hours); a new one is signed per push.
TOKEN_LIFETIME = 12 * 3600
KEY_FILE = "vapid_private.pem"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Base64url with or without padding (browsers omit it); ValueError when it is not."""
    cleaned = text.strip()
    if not cleaned or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/"
                          for c in cleaned):
        raise ValueError("not base64url")
    cleaned = cleaned.replace("+", "-").replace("/", "_").rstrip("=")
    return base64.urlsafe_b64decode(cleaned + "=" * (-len(cleaned) % 4))


def public_key_bytes(key: ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) -> bytes:
    """The uncompressed P-256 point (65 bytes, 0x04 first), the form Web Push passes keys in."""
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    return public.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


def load_public_key(raw: bytes) -> ec.EllipticCurvePublicKey:
    """A subscription's p256dh; ValueError when it is not a point on P-256."""
    if len(raw) != 65 or raw[0] != 4:
        raise ValueError("a P-256 public key is 65 bytes, uncompressed (0x04 first)")
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)


@dataclass(frozen=True)
class VapidKeys:
    private_key: ec.EllipticCurvePrivateKey

    @property
    def public_key(self) -> str:
        """What a browser passes as `applicationServerKey`: base64url of the 65-byte point."""
        return b64url(public_key_bytes(self.private_key))

    def authorization(self, endpoint: str, subject: str, now: float | None = None) -> str:
        """The `Authorization: vapid t=<JWT>, k=<public key>` header for one push to `endpoint`:
        an ES256 token whose audience is the push service's origin. Signed with the wall
        clock (the push service checks `exp` against its own), not the scheduler's."""
        parts = urlsplit(endpoint)
        claims = {"aud": f"{parts.scheme}://{parts.netloc}", "exp": int((now or time.time()) + TOKEN_LIFETIME),
                  "sub": subject}
        token = jwt.encode(claims, self.private_key, algorithm="ES256")
        return f"vapid t={token}, k={self.public_key}"


def load_or_create_vapid_keys(data_dir: Path) -> VapidKeys:
    """The deployment's VAPID key pair, `DATA_DIR/vapid_private.pem` (owner-only), generated the
    first time. Created with O_EXCL, so two services starting together keep one key: the loser
    of the race reads the winner's. Blocking: call it from an executor."""
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        temporary = path.with_name(f".{KEY_FILE}.{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        os.chmod(temporary, 0o600)
        try:
            os.link(temporary, path)  # fails if another process got there first
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
    loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(loaded, ec.EllipticCurvePrivateKey) or not isinstance(loaded.curve, ec.SECP256R1):
        raise ValueError(f"{path} is not a P-256 private key; remove it to have a new one generated")
    return VapidKeys(loaded)


def _hkdf(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def encrypt(payload: bytes, p256dh: bytes, auth_secret: bytes, *, salt: bytes | None = None,
            sender_key: ec.EllipticCurvePrivateKey | None = None) -> bytes:
    """The request body of one push: the aes128gcm header (salt, record size, the sender's
    ephemeral public key) and `payload` encrypted for the subscription in one record, padding
    delimiter 0x02 (RFC 8291 section 3.4, RFC 8188 section 2). `salt` and `sender_key` are fresh
    for every message; a test passes RFC 8291 Appendix A's to reproduce its example."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"a push payload is at most {MAX_PAYLOAD_BYTES} bytes")
    salt = salt if salt is not None else os.urandom(16)
    sender_key = sender_key or ec.generate_private_key(ec.SECP256R1())
    ua_public = public_key_bytes(load_public_key(p256dh))
    as_public = public_key_bytes(sender_key)
    ecdh_secret = sender_key.exchange(ec.ECDH(), load_public_key(p256dh))
    ikm = _hkdf(auth_secret, ecdh_secret, b"WebPush: info\x00" + ua_public + as_public, 32)
    content_key = _hkdf(salt, ikm, b"Content-Encoding: aes128gcm\x00", 16)
    nonce = _hkdf(salt, ikm, b"Content-Encoding: nonce\x00", 12)
    ciphertext = AESGCM(content_key).encrypt(nonce, payload + b"\x02", None)
    return salt + struct.pack("!IB", RECORD_SIZE, len(as_public)) + as_public + ciphertext


def fit_payload(message: dict) -> bytes:
    """`message` as compact UTF-8 JSON that fits one record: its `data` dropped first, then its
    `body` and `title` shortened, when it would not."""
    message = dict(message)

    def encoded() -> bytes:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    if len(encoded()) > MAX_PAYLOAD_BYTES:
        message.pop("data", None)
    for name in ("body", "title"):
        while len(encoded()) > MAX_PAYLOAD_BYTES and message.get(name):
            text = str(message[name])
            message[name] = text[:len(text) // 2] + "…" if len(text) > 2 else ""
    return encoded()
