"""Pure binary reading: ELF, fatbin, cubin, archives, wheels, targets. No subprocesses."""
