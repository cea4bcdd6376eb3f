"""An audit's answers: each artifact and each distribution on each device, from the rules.

:mod:`gate.audit.artifact` (one artifact: its routes, its prediction, the device's
verdict phrase, why it fails a required device) and :mod:`gate.audit.verdicts` (one
distribution: its parts, its answer per device) read the reader's records and ask the
decision core (:mod:`gate.rules.environment`, :mod:`gate.rules.routes`); the views
(:mod:`gate.render.inspect`, :mod:`gate.render.environment`) say what they answer.
"""
