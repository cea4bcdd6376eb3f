"""Ed25519 keys and DSSE envelopes: sign a manifest, check a signature.

Layered like sigstore-python's ``sign.py``: a key source (file or environment)
gives a :class:`Signer`; the signer turns a payload into an :class:`Envelope`.

DSSE (https://github.com/secure-systems-lab/dsse/blob/master/protocol.md): the
signature is over the pre-authentication encoding
``"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body``, LEN in ASCII decimal, and
the envelope is ``{"payload": b64, "payloadType": type, "signatures": [{"keyid",
"sig": b64}]}``.

A key's id is the one securesystemslib (and so in-toto and python-tuf) computes by
default: the SHA-256 of the canonical JSON ``{"keytype": "ed25519", "keyval":
{"public": <raw key, hex>}, "scheme": "ed25519"}``. securesystemslib only tries a key
on signatures that carry its id, so with this id ``Envelope.verify([SSlibKey.from_crypto(
public_key)], 1)`` finds our signature with no ``keyid=`` argument. cuda-gate 0.1 used
the SHA-256 (hex) of the key's DER SubjectPublicKeyInfo instead; the key itself did not
change, ``cuda-gate verify`` tries every signature whatever its id (DSSE: key ids are
hints), and an envelope written before the change verifies with securesystemslib when its
own id is passed: ``SSlibKey.from_crypto(key, keyid=...)``.

The private key's bytes never leave this module: they are not in any record's
repr, any error message, or any file the gate writes except the one ``keygen``
writes on purpose.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gate.config.options import KEY_FILE_ENV, KEY_PEM_ENV
from gate.errors import BadInputError, ConfigError, SignatureError

PAYLOAD_TYPE = "application/vnd.in-toto+json"
ED25519_SIGNATURE_SIZE = 64


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding of a payload and its type: what is signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def keyid_for(public_key: Ed25519PublicKey) -> str:
    """The key id securesystemslib computes by default (see the module docstring)."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    key = {"keytype": "ed25519", "keyval": {"public": raw.hex()}, "scheme": "ed25519"}
    # Canonical JSON (OLPC) of ASCII-only strings is sorted keys and no whitespace.
    canonical = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key and its id; checks signatures."""

    key: Ed25519PublicKey = field(repr=False)
    keyid: str

    def verify(self, signature: bytes, data: bytes) -> bool:
        """Whether ``signature`` is this key's signature over ``data``."""
        try:
            self.key.verify(signature, data)
        except InvalidSignature:
            return False
        return True

    def pem(self) -> bytes:
        """The key as SubjectPublicKeyInfo PEM, the form ``keygen`` writes and ``--key`` reads."""
        return self.key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@dataclass(frozen=True)
class Signer:
    """An Ed25519 private key, where it came from (never its bytes), and its key id."""

    key: Ed25519PrivateKey = field(repr=False)
    keyid: str
    source: str
    pem: bytes = field(default=b"", repr=False)  # the key as it was given, for redaction
    # The file the key was read from: it stays readable to every process of its user.
    file: Path | None = None

    def secrets(self) -> tuple[tuple[str, str], ...]:
        """The key's texts that must never be written anywhere, named for messages.

        The PEM as given (a file read with ``--signing-key`` or
        ``CUDA_GATE_SIGNING_KEY_FILE`` is not in the environment) and its PKCS#8 form.
        """
        pkcs8 = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        label = f"the signing key ({self.source})"
        return tuple((label, text.decode("ascii", "replace")) for text in (self.pem, pkcs8) if text)

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature over ``data``."""
        return self.key.sign(data)

    def public_key(self) -> PublicKey:
        """The matching public key."""
        return PublicKey(self.key.public_key(), self.keyid)


@dataclass(frozen=True)
class KeyPair:
    """A new key pair as PEM: the private key unencrypted PKCS#8, the public key SPKI."""

    private_pem: bytes = field(repr=False)
    public_pem: bytes
    keyid: str


def generate_key_pair() -> KeyPair:
    """A fresh Ed25519 key pair."""
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = PublicKey(key.public_key(), keyid_for(key.public_key()))
    return KeyPair(private_pem=private_pem, public_pem=public.pem(), keyid=public.keyid)


def signer_from_pem(pem: bytes, source: str, file: Path | None = None) -> Signer:
    """A Signer from PEM bytes; ``source`` names where they came from, for messages;
    ``file`` is the file they were read from, if any."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError as e:
        raise SignatureError(
            f"{source}: the private key is encrypted",
            hint="store it unencrypted in a CI secret or a file only the runner can read",
        ) from e
    except (ValueError, UnsupportedAlgorithm) as e:
        if _is_public_key(pem):
            # A configuration mistake, not a bad signature: keygen's other file was meant.
            raise ConfigError(
                f"{source}: a public key, not the private signing key",
                hint="sign with the private key, the other file `cuda-gate keygen` wrote "
                "(cuda-gate.key)",
            ) from e
        # The library's message can quote the input; say nothing about the bytes.
        raise SignatureError(f"{source}: not a PEM private key") from e
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{source}: not an Ed25519 private key")
    return Signer(key=key, keyid=keyid_for(key.public_key()), source=source, pem=pem, file=file)


def _is_public_key(pem: bytes) -> bool:
    try:
        serialization.load_pem_public_key(pem)
    except (ValueError, UnsupportedAlgorithm):
        return False
    return True


def load_public_key(path: Path) -> PublicKey:
    """The Ed25519 public key in a PEM file (what ``keygen`` writes as ``*.pub``)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the public key: {e.strerror or e}") from e
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as e:
        raise SignatureError(f"{path}: not a PEM public key") from e
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path}: not an Ed25519 public key")
    return PublicKey(key, keyid_for(key))


def load_signer_from_env_or_file(
    key_file: Path | None,
    environ: Mapping[str, str] | None = None,
    *,
    configured: Path | None = None,
) -> Signer | None:
    """The configured signing key, or None when none is configured.

    As every option: the command line, then the environment, then the configuration
    file. In order: ``key_file`` (``--signing-key``), the file named by
    ``CUDA_GATE_SIGNING_KEY_FILE``, the PEM held in ``CUDA_GATE_SIGNING_KEY`` (a CI
    secret), ``configured`` (the config's ``[signing] key_file``). A configured key that
    cannot be used is an error, never a silent "unsigned".
    """
    env = os.environ if environ is None else environ
    text = env.get(KEY_PEM_ENV, "")
    path = key_file or (Path(env[KEY_FILE_ENV]) if env.get(KEY_FILE_ENV) else None)
    if path is None and not text.strip():
        path = configured
    if path is not None:
        try:
            pem = path.read_bytes()
        except OSError as e:
            raise ConfigError(f"{path}: cannot read the signing key: {e.strerror or e}") from e
        return signer_from_pem(pem, str(path), file=path)
    if text.strip():
        return signer_from_pem(text.strip().encode("utf-8") + b"\n", f"${KEY_PEM_ENV}")
    return None


@dataclass(frozen=True)
class EnvelopeSignature:
    """One signature in an envelope."""

    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    """A DSSE envelope: the payload, its type, and the signatures over its PAE."""

    payload: bytes
    payload_type: str
    signatures: tuple[EnvelopeSignature, ...]

    def to_json(self) -> dict[str, Any]:
        """The envelope's standard JSON form."""
        return {
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "payloadType": self.payload_type,
            "signatures": [
                {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")}
                for s in self.signatures
            ],
        }

    def dumps(self) -> str:
        """The envelope as indented JSON text with a final newline."""
        return json.dumps(self.to_json(), indent=2) + "\n"


def sign_envelope(payload: bytes, signer: Signer, payload_type: str = PAYLOAD_TYPE) -> Envelope:
    """A DSSE envelope holding ``payload`` signed by ``signer``."""
    signature = signer.sign(pae(payload_type, payload))
    return Envelope(payload, payload_type, (EnvelopeSignature(signer.keyid, signature),))


def parse_envelope(data: bytes, source: str) -> Envelope:
    """Parse an envelope's JSON; BadInputError naming ``source`` when it is not one."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInputError(f"{source}: not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise BadInputError(f"{source}: not a DSSE envelope (expected a JSON object)")
    payload_b64, payload_type, sigs = (
        doc.get("payload"),
        doc.get("payloadType"),
        doc.get("signatures"),
    )
    if not isinstance(payload_b64, str) or not isinstance(payload_type, str):
        raise BadInputError(f"{source}: not a DSSE envelope (payload or payloadType missing)")
    if not isinstance(sigs, list) or not all(isinstance(s, dict) for s in sigs):
        raise BadInputError(f"{source}: not a DSSE envelope (signatures is not a list)")
    signatures = []
    for entry in sigs:
        keyid, sig = entry.get("keyid", ""), entry.get("sig")
        if not isinstance(keyid, str) or not isinstance(sig, str):
            raise BadInputError(f"{source}: a signature entry has no keyid or sig string")
        signatures.append(EnvelopeSignature(keyid, _b64decode(sig, source, "signature")))
    return Envelope(_b64decode(payload_b64, source, "payload"), payload_type, tuple(signatures))


def verify_envelope(envelope: Envelope, key: PublicKey) -> EnvelopeSignature:
    """The signature in ``envelope`` that ``key`` made over its PAE; SignatureError if none.

    Every signature is tried against the key (DSSE says key ids are hints only),
    so a wrong or missing key id does not hide a good signature.
    """
    if not envelope.signatures:
        raise SignatureError("the envelope holds no signatures")
    message = pae(envelope.payload_type, envelope.payload)
    for signature in envelope.signatures:
        if len(signature.sig) == ED25519_SIGNATURE_SIZE and key.verify(signature.sig, message):
            return signature
    ids = ", ".join(s.keyid[:16] or "(none)" for s in envelope.signatures)
    raise SignatureError(
        f"no signature in the envelope verifies with key {key.keyid[:16]} (signed by: {ids})"
    )


def _b64decode(text: str, source: str, what: str) -> bytes:
    """Standard base64 (DSSE also allows URL-safe), strictly: no stray characters."""
    alphabet = text.replace("-", "+").replace("_", "/")
    padded = alphabet + "=" * (-len(alphabet) % 4)
    try:
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadInputError(f"{source}: the {what} is not valid base64") from e
