# expect: passed
# needs: sandbox
# Put a server that never answers where the worker's own shared-memory manager listens, then
# reply with a tensor of its own: its handle names that socket, and a judge that registered the
# reply there would wait on it forever (inside torch, with the GIL held: no deadline fires).
import glob
import os
import socket
import threading

import torch

_held = []


def _never_answer(path):
    os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    _held.append(server)

    def accept():
        while True:
            _held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()


def custom_kernel(data):
    if not _held:
        torch.zeros(1).share_memory_()  # starts the worker's own manager, if not yet running
        for path in glob.glob(os.path.join(os.environ["TMPDIR"], "torch-shm-dir-*", "*.sock")):
            _never_answer(path)
    x, _ = data
    return x + 1
