"""The decision core: every rule the gate decides by, once, as frozen records and functions.

The stages, ``inspect``, ``verify``, ``matrix`` and the attestations ask these; none of
them decides on its own. The data the rules read is ``compat.json``, loaded and
validated into records (:mod:`gate.rules.compat`), each row citing its source.

==============================  ==================================================
question                        where it is answered
==============================  ==================================================
what a target is               :mod:`gate.rules.targets` (``Target``, ``Capability``)
where a target's code runs or   :mod:`gate.rules.compat` (``sass_runs_on``,
JITs                            ``ptx_jits_for``, ``family_members``: the table's)
which route a kernel takes on   :mod:`gate.rules.routes` (``route``,
a device                        ``sass_route``, ``ptx_route``)
can this driver JIT this PTX    :func:`gate.rules.routes.jit_support`
does an artifact run on a       :func:`gate.rules.routes.judge` (per kernel for the
device                          project's code, as a whole for other libraries)
what satisfies a required       :mod:`gate.rules.require`
target (plain, ``a``, ``f``)
which kernel a required name    :mod:`gate.rules.kernels`
means
why a check or a run failed     :mod:`gate.rules.causes` (``Cause``,
                                ``RuntimeFailure``, ``RunFacts``)
the hosts a device ships on     :func:`gate.rules.hosts.host_for`
a check's state, the verdict,   :mod:`gate.rules.verdict`
the test-result lists
what a release policy lets      :mod:`gate.rules.policy` (``[policy]``: PTX as
pass, warns on or fails         device code, surplus SASS, PTX for the highest target)
what answers for an artifact,   :mod:`gate.rules.environment` (``answer``,
a set of builds and a           ``unmet``: ``--require-device``, ``needs_device``,
distribution on a device        ``set_part``, ``overall``, ``shortfalls``)
how a distribution's kernels   :mod:`gate.rules.shares` (``tally``, ``Shares.majority``,
share the routes on a device    ``runs``, ``partly``, ``reach``)
which of a library's builds a   :mod:`gate.rules.variants` (``RULES``, ``find_sets``,
package loads at run time       ``VariantSet.loaded``)
what a run says about its       :mod:`gate.rules.prediction` (``reading``,
path's prediction; a diagnosis  ``excused``, ``diagnosis``, ``jit_gap``)
==============================  ==================================================

This package imports nothing of the gate but :mod:`gate.errors` and
:mod:`gate.demangle`; ``nox -s mutation`` judges its tests by mutating it.
"""
