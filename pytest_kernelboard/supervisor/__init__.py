"""The judge's handle on its workers: everything here runs in the judge's process.

Starting a worker (forked from the zygote, or under bwrap: `launch`, `sandbox`, `environment`),
a request with its deadline and its reply read as untrusted data (`client`, `wire`, `pickles`),
watching and pausing the worker's process tree (`stall`, `proctree`, `pausing`, `host_waits`).
What the worker process runs lives in `pytest_kernelboard.worker`, which imports nothing of this.
"""
