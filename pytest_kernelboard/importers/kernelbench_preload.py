"""Imported once by the fork server that `kernelboard import kernelbench` forks every problem's
process from (kernelbench._process_context): what each process would otherwise import again.

torch and the importer, then one operation on the meta device: the first one imports torch's
meta kernels and decompositions (some 900 modules, sympy among them: seconds), which every
problem's shapes are first tried with. Nothing runs on a CPU here, so no thread pool exists yet
when the server forks.
"""

import torch

from . import kernelbench, kernelbench_utils  # noqa: F401

with torch.device("meta"), torch.no_grad():
    torch.nn.functional.linear(torch.empty(2, 4), torch.empty(3, 4), torch.empty(3))
    torch.log_softmax(torch.empty(2, 4), dim=1)
