"""Human- and CI-readable renderings of a run: console table, Markdown, JUnit."""
