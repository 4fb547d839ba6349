"""Keep Triton's CPU interpreter working with the NumPy it is installed next to.

Without a GPU the worker runs Triton kernels through Triton's interpreter
(TRITON_INTERPRET=1). The interpreter holds every scalar kernel argument (`n_cols`,
`tl.program_id(0)`, ...) as a NumPy array of shape (1,), and gives `tl.tensor` an
`__index__` that is `int(handle.data)`. Python's `range` calls `__index__`, so a loop
such as

    for start in range(0, n_cols, BLOCK):  # n_cols: a plain, runtime argument

asks NumPy to turn a shape-(1,) array into an int. NumPy deprecated that in 1.25 and
NumPy 2.4 made it an error ("only 0-dimensional arrays can be converted to Python
scalars"), so with Triton 3.6 such a kernel fails on the CPU while it runs on a GPU.
Declaring the bound `tl.constexpr` avoids it, but participants should not need to.

`patch_triton_interpreter()` fixes exactly that one method: the interpreter installs its
`tl.tensor` methods afresh at every launch (and takes them away afterwards), so we wrap
the function that installs them and, after it, install an `__index__` that converts a
one-element array through its 0-d view, which every NumPy accepts. Nothing else in
Triton changes.

The patch is applied only when a probe of the installed interpreter shows the problem, so
a Triton or NumPy release that fixes it turns this into a no-op; so do a missing or
unimportable Triton and an interpreter whose internals no longer look as expected. Only
the worker calls this: this module does not import Triton until the function runs.
"""

from __future__ import annotations

import importlib.util
import operator
from types import SimpleNamespace
from typing import Any

# Set on our wrapper, so that a second call does not wrap it again.
_MARK = "_kernelboard_index_fix"


def patch_triton_interpreter() -> None:
    """Let runtime scalar arguments of interpreted Triton kernels work as `range` bounds.

    A no-op when Triton is not installed, cannot be imported, or does not have the problem.
    Call it in the worker after setting TRITON_INTERPRET=1 and before importing a submission.
    """
    if importlib.util.find_spec("triton") is None:
        return
    try:
        import numpy as np
        from triton.runtime import interpreter
    except Exception:  # a broken Triton install fails the submission that uses it, not us
        return
    install = getattr(interpreter, "_patch_lang_tensor", None)
    if install is None or getattr(install, _MARK, False):
        return  # internals changed (nothing we know how to fix), or already patched
    if not _index_is_broken(interpreter, install, np):
        return

    def install_then_fix_index(tensor: Any, scope: Any) -> None:
        install(tensor, scope)
        # Through the same scope, so the interpreter restores the original after the launch.
        original_index = tensor.__index__
        scope.set_attr(tensor, "__index__", _fixed_index(original_index))

    setattr(install_then_fix_index, _MARK, True)
    interpreter._patch_lang_tensor = install_then_fix_index


def _fixed_index(original_index: Any) -> Any:
    """`tensor.__index__` that accepts the interpreter's one-element scalar arrays."""

    def index(self: Any) -> int:
        data = self.handle.data
        if getattr(data, "size", None) == 1:
            # A 0-d view converts on every NumPy version, with the same result `int(data)`
            # gave before NumPy 2.4 (floats truncate, as they did then).
            return int(data.reshape(()))
        return original_index(self)  # a block: let the interpreter raise as it always did

    return index


def _index_is_broken(interpreter: Any, install: Any, np: Any) -> bool:
    """Whether the interpreter's `__index__` fails on a scalar, probed on a throwaway class.

    The probe runs the interpreter's own installer on a stand-in class and indexes a
    stand-in tensor holding 3 the way the interpreter holds scalars, so it sees whatever
    the installed Triton and NumPy actually do, without launching a kernel.
    """
    scope_class = getattr(interpreter, "_LangPatchScope", None)
    if scope_class is None:
        return False

    class Probe:
        pass

    try:
        install(Probe, scope_class())
        probe = Probe()
        probe.handle = SimpleNamespace(data=np.array([3], dtype=np.int32))
    except Exception:
        return False  # the installer no longer works this way: leave it alone
    try:
        return operator.index(probe) != 3
    except TypeError:
        return True
