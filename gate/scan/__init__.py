"""The engine that reads many files: walks, caches, pools of threads and processes.

:mod:`gate.reader` parses one file into frozen records and keeps nothing; this package
decides what is read, where and when: :mod:`~gate.scan.walk` (read these paths, reports
in order), :mod:`~gate.scan.audit` (environments by distribution), :mod:`~gate.scan.parallel`
(a pool of processes), :mod:`~gate.scan.files` (one file, through the caches or not),
:mod:`~gate.scan.threads` (the threads that decode one file's entries, and the process
settings they need), and the caches kept between runs (:mod:`~gate.scan.cache`,
:mod:`~gate.scan.wheelcache`, :mod:`~gate.scan.walkcache`). It imports the reader; the
reader never imports it.
"""
