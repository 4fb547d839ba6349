"""Starting point for vectoradd: write A + B into the pre-allocated C and return it."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    # TODO: replace with your own kernel.
    c.copy_(a + b)
    return c
