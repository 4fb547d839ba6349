"""WRONG: off-by-one shift, element i receives input[i + 1] (and the last stays unwritten)."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    inp, output = data
    output[:-1] = inp[1:]
    return output
