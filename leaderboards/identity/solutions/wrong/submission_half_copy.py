"""WRONG: copies through float16 to halve the bytes moved; the check is exact."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    inp, output = data
    output.copy_(inp.half())
    return output
