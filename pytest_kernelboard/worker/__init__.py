"""The worker: the only process that ever runs participant code.

`client` is the judge's side (spawn, send, wait, kill); `main` runs in the child;
`transfer` moves tensors between them through shared memory or CUDA IPC;
`environment` decides what the child may see.
"""
