# expect: passed
# needs: sandbox
# Every shared-memory manager socket the worker can reach gets a registration whose client goes
# before its answer, and a record cut short whose client goes while the manager waits for the
# rest: torch's manager ends on either, and a judge whose manager has ended fails every later
# CPU tensor with "Broken pipe".
import glob
import os
import socket
import struct
import time


def _hang_up_on(path):
    for record, linger_s in (
        (struct.pack("=ib60s3x", os.getpid(), 0, b"/kb_hostile_@MARKER@"), 0.0),
        (b"\1\2\3", 0.2),  # the manager has read these and waits for the other 65 bytes
    ):
        try:
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(path)
            client.sendall(record)
            time.sleep(linger_s)
            client.close()
        except OSError:
            pass


def custom_kernel(data):
    own = os.environ.get("TMPDIR", "/nonexistent")
    for path in glob.glob("/tmp/**/*.sock", recursive=True):
        if not path.startswith(own):
            _hang_up_on(path)
    x, out = data
    return out.copy_(x + 1)
