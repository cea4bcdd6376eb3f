"""Attestation: the in-toto manifest, DSSE signing, verification."""
