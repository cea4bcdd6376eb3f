"""What keeps the gate trustworthy while it runs the project's code: secrets redacted and held
out of reach (redact, vault), the gate's own code unchanged (selfcheck), and nothing left
running by a gate that was killed (watchdog)."""
