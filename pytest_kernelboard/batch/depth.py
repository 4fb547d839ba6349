"""How many candidates a GPU's judge prepares ahead of the one it times, alone or beside others.

A candidate's worker start, import and correctness calls made ahead all run while the one before
it is judged; fewer than this left a worker's start on the GPU's critical path (on four H200s,
where every GPU's driver is busy at once, a worker took 1.5 s to start against 0.7 s alone).
"""

PREFETCH = 3  # candidates prepared ahead of the one being judged
IN_FLIGHT = PREFETCH + 1  # candidates queued at each GPU's judge process: those and the one judged
