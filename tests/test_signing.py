"""DSSE signing with Ed25519: spec vectors, an independent verifier, tampering, key sources."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope as SslibEnvelope

# securesystemslib re-exports these without __all__; mypy's strict re-export check objects.
from securesystemslib.signer import CryptoSigner, SSlibKey  # type: ignore[attr-defined]

from gate.attest.signing import (
    PAYLOAD_TYPE,
    Envelope,
    EnvelopeSignature,
    PublicKey,
    generate_key_pair,
    keyid_for,
    load_public_key,
    load_signer_from_env_or_file,
    pae,
    parse_envelope,
    sign_envelope,
    signer_from_pem,
    verify_envelope,
)
from gate.config.options import KEY_FILE_ENV, KEY_PEM_ENV
from gate.errors import BadInputError, ConfigError, SignatureError

pytestmark = pytest.mark.unit

PAYLOAD = b'{"_type": "https://in-toto.io/Statement/v1", "subject": []}\n'


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("keys")
    pair = generate_key_pair()
    (folder / "k.key").write_bytes(pair.private_pem)
    (folder / "k.pub").write_bytes(pair.public_pem)
    return folder / "k.key", folder / "k.pub"


def test_pae_matches_the_dsse_spec_vector() -> None:
    # protocol.md's worked example.
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("", b"") == b"DSSEv1 0  0 "


def test_round_trip_and_wrong_key(pair_files: tuple[Path, Path]) -> None:
    signer = load_signer_from_env_or_file(pair_files[0], environ={})
    assert signer is not None
    envelope = parse_envelope(sign_envelope(PAYLOAD, signer).dumps().encode(), "e")
    assert envelope.payload == PAYLOAD
    assert envelope.payload_type == PAYLOAD_TYPE
    assert verify_envelope(envelope, load_public_key(pair_files[1])).keyid == signer.keyid
    other = signer_from_pem(generate_key_pair().private_pem, "other").public_key()
    with pytest.raises(SignatureError, match="no signature in the envelope verifies"):
        verify_envelope(envelope, other)


def test_securesystemslib_verifies_our_envelope(pair_files: tuple[Path, Path]) -> None:
    signer = load_signer_from_env_or_file(pair_files[0], environ={})
    assert signer is not None
    ours = sign_envelope(PAYLOAD, signer).to_json()
    theirs = SslibEnvelope.from_dict(json.loads(json.dumps(ours)))
    public = serialization.load_pem_public_key(pair_files[1].read_bytes())
    # No keyid= needed: our key id is the one securesystemslib computes.
    key = SSlibKey.from_crypto(public)
    assert set(theirs.verify([key], 1)) == {signer.keyid}
    assert theirs.payload_type == PAYLOAD_TYPE
    # A tampered payload fails the independent check too.
    tampered = dict(ours, payload=base64.b64encode(PAYLOAD.replace(b"[]", b"[1]")).decode())
    with pytest.raises(Exception, match="threshold"):
        SslibEnvelope.from_dict(tampered).verify([key], 1)


def test_we_verify_a_securesystemslib_envelope() -> None:
    private = Ed25519PrivateKey.generate()
    envelope = SslibEnvelope(PAYLOAD, PAYLOAD_TYPE, {})
    envelope.sign(CryptoSigner(private))
    parsed = parse_envelope(json.dumps(envelope.to_dict()).encode(), "sslib")
    # Both sides compute the same key id for the same key.
    ours = PublicKey(private.public_key(), keyid_for(private.public_key()))
    assert parsed.signatures[0].keyid == ours.keyid
    assert verify_envelope(parsed, ours) == parsed.signatures[0]


def test_an_envelope_with_the_old_spki_key_id_still_verifies(
    pair_files: tuple[Path, Path],
) -> None:
    # cuda-gate 0.1 named keys by the SHA-256 of their SPKI; the key did not change.
    signer = load_signer_from_env_or_file(pair_files[0], environ={})
    assert signer is not None
    der = signer.key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    old_id = hashlib.sha256(der).hexdigest()
    assert old_id != signer.keyid
    new = sign_envelope(PAYLOAD, signer)
    old = Envelope(PAYLOAD, PAYLOAD_TYPE, (EnvelopeSignature(old_id, new.signatures[0].sig),))
    assert verify_envelope(old, signer.public_key()).keyid == old_id
    public = serialization.load_pem_public_key(pair_files[1].read_bytes())
    theirs = SslibEnvelope.from_dict(old.to_json())
    with pytest.raises(Exception, match="threshold"):
        theirs.verify([SSlibKey.from_crypto(public)], 1)
    assert set(theirs.verify([SSlibKey.from_crypto(public, keyid=old_id)], 1)) == {old_id}


def test_every_single_byte_change_is_rejected(pair_files: tuple[Path, Path]) -> None:
    signer = load_signer_from_env_or_file(pair_files[0], environ={})
    assert signer is not None
    key = signer.public_key()
    envelope = sign_envelope(PAYLOAD, signer)
    sig = envelope.signatures[0].sig
    for i in range(len(PAYLOAD)):
        for mask in (0x01, 0x80, 0xFF):
            changed = bytearray(PAYLOAD)
            changed[i] ^= mask
            bad = Envelope(bytes(changed), PAYLOAD_TYPE, envelope.signatures)
            with pytest.raises(SignatureError):
                verify_envelope(bad, key)
    for i in range(len(sig)):
        for mask in (0x01, 0x80, 0xFF):
            changed = bytearray(sig)
            changed[i] ^= mask
            bad = Envelope(
                PAYLOAD, PAYLOAD_TYPE, (EnvelopeSignature(signer.keyid, bytes(changed)),)
            )
            with pytest.raises(SignatureError):
                verify_envelope(bad, key)
    with pytest.raises(SignatureError):
        verify_envelope(Envelope(PAYLOAD, "application/json", envelope.signatures), key)
    with pytest.raises(SignatureError):
        verify_envelope(Envelope(PAYLOAD, PAYLOAD_TYPE, ()), key)
    # Truncated or extended signatures are rejected, not passed to the library.
    with pytest.raises(SignatureError):
        verify_envelope(Envelope(PAYLOAD, PAYLOAD_TYPE, (EnvelopeSignature("", sig + b"\0"),)), key)


def test_keyid_is_securesystemslibs_default_key_id(pair_files: tuple[Path, Path]) -> None:
    key = load_public_key(pair_files[1])
    assert key.keyid == SSlibKey.from_crypto(key.key).keyid
    assert key.pem() == pair_files[1].read_bytes()


def test_key_sources_in_order(pair_files: tuple[Path, Path], tmp_path: Path) -> None:
    pem = pair_files[0].read_text()
    expected = load_public_key(pair_files[1]).keyid
    assert load_signer_from_env_or_file(None, environ={}) is None
    assert load_signer_from_env_or_file(None, environ={KEY_PEM_ENV: "  \n"}) is None
    from_env = load_signer_from_env_or_file(None, environ={KEY_PEM_ENV: pem})
    from_env_file = load_signer_from_env_or_file(None, environ={KEY_FILE_ENV: str(pair_files[0])})
    # A secret pasted without its final newline, or with Windows line ends, still loads.
    bare = load_signer_from_env_or_file(None, environ={KEY_PEM_ENV: pem.strip()})
    crlf = load_signer_from_env_or_file(None, environ={KEY_PEM_ENV: pem.replace("\n", "\r\n")})
    assert {s.keyid for s in (from_env, from_env_file, bare, crlf) if s} == {expected}
    assert from_env is not None
    assert from_env.source == f"${KEY_PEM_ENV}"
    other = tmp_path / "other.key"
    other.write_bytes(generate_key_pair().private_pem)
    explicit = load_signer_from_env_or_file(other, environ={KEY_FILE_ENV: str(pair_files[0])})
    assert explicit is not None
    assert explicit.keyid != expected


# --signing-key, CUDA_GATE_SIGNING_KEY_FILE, CUDA_GATE_SIGNING_KEY, [signing] key_file, the winner
Sources = tuple[str | None, str | None, str | None, str | None, str | None]


@pytest.mark.parametrize(
    "case",
    [
        ("cli", "env-file", "env-pem", "config", "cli"),
        (None, "env-file", "env-pem", "config", "env-file"),
        (None, None, "env-pem", "config", "env-pem"),  # the environment beats the config
        (None, None, None, "config", "config"),
        (None, None, None, None, None),
    ],
)
def test_the_key_is_taken_command_line_then_environment_then_configuration(
    tmp_path: Path, case: Sources
) -> None:
    cli, env_file, env_pem, config, wins = case
    keys = {name: generate_key_pair() for name in ("cli", "env-file", "env-pem", "config")}
    for name, pair in keys.items():
        (tmp_path / f"{name}.key").write_bytes(pair.private_pem)
    environ = {}
    if env_file:
        environ[KEY_FILE_ENV] = str(tmp_path / f"{env_file}.key")
    if env_pem:
        environ[KEY_PEM_ENV] = keys[env_pem].private_pem.decode()
    signer = load_signer_from_env_or_file(
        tmp_path / f"{cli}.key" if cli else None,
        environ,
        configured=tmp_path / f"{config}.key" if config else None,
    )
    if wins is None:
        assert signer is None
    else:
        assert signer is not None
        assert signer.keyid == keys[wins].keyid


def test_unusable_keys_fail_without_echoing_the_key(tmp_path: Path) -> None:
    garbage = "-----BEGIN PRIVATE KEY-----\nnot-a-key-s3cr3t-material\n-----END PRIVATE KEY-----\n"
    with pytest.raises(SignatureError) as caught:
        load_signer_from_env_or_file(None, environ={KEY_PEM_ENV: garbage})
    assert "s3cr3t" not in caught.value.one_line()
    assert caught.value.one_line().startswith(f"${KEY_PEM_ENV}: not a PEM private key")
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_pem = ec_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(SignatureError, match="not an Ed25519 private key"):
        signer_from_pem(ec_pem, "ec.key")
    encrypted = generate_key_pair()
    key = serialization.load_pem_private_key(encrypted.private_pem, None)
    locked = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    with pytest.raises(SignatureError, match="encrypted"):
        signer_from_pem(locked, "locked.key")
    with pytest.raises(ConfigError, match="cannot read the signing key"):
        load_signer_from_env_or_file(tmp_path / "absent.key", environ={})
    pub = tmp_path / "ec.pub"
    pub.write_bytes(
        ec_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(SignatureError, match="not an Ed25519 public key"):
        load_public_key(pub)


def test_signer_repr_holds_no_key_material(pair_files: tuple[Path, Path]) -> None:
    signer = load_signer_from_env_or_file(pair_files[0], environ={})
    pair = generate_key_pair()
    body = pair_files[0].read_text().splitlines()[1]
    assert body not in repr(signer)
    assert pair.private_pem.decode().splitlines()[1] not in repr(pair)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"not json", "not JSON"),
        (b"[]", "expected a JSON object"),
        (b'{"payloadType": "x"}', "payload or payloadType missing"),
        (b'{"payload": "", "payloadType": "x", "signatures": {}}', "signatures is not a list"),
        (b'{"payload": "!!", "payloadType": "x", "signatures": []}', "payload is not valid base64"),
        (b'{"payload": "", "payloadType": "x", "signatures": [{"keyid": "a"}]}', "no keyid or sig"),
    ],
)
def test_malformed_envelopes(text: bytes, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        parse_envelope(text, "env.json")


def test_url_safe_base64_is_accepted(pair_files: tuple[Path, Path]) -> None:
    signer = load_signer_from_env_or_file(pair_files[0], environ={})
    assert signer is not None
    doc = sign_envelope(b"\xfb\xff" * 10, signer).to_json()
    doc["payload"] = base64.urlsafe_b64encode(b"\xfb\xff" * 10).decode().rstrip("=")
    assert parse_envelope(json.dumps(doc).encode(), "e").payload == b"\xfb\xff" * 10
