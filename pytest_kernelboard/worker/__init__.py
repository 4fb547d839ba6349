"""The worker process: the only process that ever runs participant code.

Everything here runs inside the sandboxed worker (`main`, started by the judge or forked by the
`zygote`) and imports nothing of the judge's side; the judge's handle on it lives in
`pytest_kernelboard.supervisor`, and what both import in `pytest_kernelboard.channel`.
"""
