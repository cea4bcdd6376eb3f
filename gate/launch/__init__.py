"""The launch recorder, end to end: the CUPTI injection library built and put in front of
each run (recorder), its per-process record decoded (log), which code ran each launched
kernel (routes), the coverage checks over the runs (coverage, deciding through
gate.rules.coverage), and what the run record keeps of it (summary)."""
