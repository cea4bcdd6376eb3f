"""The pipeline stages, one module each; each returns a frozen outcome."""
