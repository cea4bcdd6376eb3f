"""GitHub: the REST client, runner classes, and the release matrix."""
