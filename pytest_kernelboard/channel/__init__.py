"""What crosses between the judge and its workers, imported by both processes.

The written protocol, the device windows and the CUDA transports, the copies of inputs and
outputs, the fences every wait goes through, the scrubbing queue and the heap's trim. Nothing
here imports either side (`pytest_kernelboard.supervisor`, `pytest_kernelboard.worker`).
"""
