"""Correct identity: one copy into the pre-allocated output."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    inp, output = data
    output.copy_(inp)
    return output
