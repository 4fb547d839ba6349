# expect: timeout
# timeout: 2
# Announce a 1 MiB reply, send ten bytes of it, and stall: the judge must not wait forever.
import os
import struct
import sys
import time


def custom_kernel(data):
    os.write(int(sys.argv[1]), struct.pack("!i", 1 << 20) + b"0123456789")
    time.sleep(3600)
