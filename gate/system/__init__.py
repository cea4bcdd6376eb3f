"""What the machine the gate runs on is: its GPU driver and toolkit, the project's git
revision, and the CI service around the run (facts read, nothing decided)."""
