"""Step 4's facts on a real CUDA machine: what verify compares must be readable there."""

from __future__ import annotations

import platform

import pytest

from gate.attest.verify import gather_machine_facts
from gate.rules.targets import Capability, Version

pytestmark = pytest.mark.gpu


def test_gathers_driver_and_capability_from_the_real_device() -> None:
    facts = gather_machine_facts()
    assert facts.host_arch == platform.machine()
    assert facts.driver_version
    assert facts.driver_cuda_version is not None
    Version.parse(facts.driver_cuda_version)
    assert facts.capability is not None
    assert Capability.parse(facts.capability).major >= 5
