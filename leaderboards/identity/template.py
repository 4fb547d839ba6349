"""Starting point for identity: copy data[0] into data[1] and return data[1]."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    inp, output = data
    # TODO: replace with your own kernel.
    output.copy_(inp)
    return output
