"""WRONG: adds in bfloat16 ("same range, faster") and loses three mantissa bits."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    c.copy_(a.bfloat16() + b.bfloat16())
    return c
