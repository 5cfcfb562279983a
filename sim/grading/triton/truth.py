"""A block's truth as Triton compiles it: none, so the kernel's taking it is refused while the interpreter runs it.

Triton's interpreter takes a block of more than one value as True (`_patch_lang_tensor`'s `_get_bool`),
so Python's `max(a, b)` and `min(a, b)` keep one operand whole, `not block` is the scalar False and
`a and b` is b, where Triton's compiler makes them elementwise (`builtin_max`, `builtin_min`: tl.maximum,
tl.minimum; `tensor.__not__`: `semantic.not_`; `_apply_boolean_values`: logical_and, logical_or; the
compiler warns that all but `not` are deprecated on blocks) and refuses `if block:` (red team 106). No
Python hook makes `not`, `and` or `or` elementwise, so the truth itself is refused, with what to write
instead. A one-element value's truth is its value's, as on a GPU. Triton's own code (`semantic.load`'s
`if mask and …`) keeps the interpreter's True: only the kernel's file is refused.
"""

import sys

import numpy as np


def truth(file: str):
    """`tl.tensor.__bool__` for a launch of a kernel of `file`: a one-element value's truth; a block's, where the
    kernel's file takes it, ValueError; elsewhere True, as the interpreter has it."""

    def of(self) -> bool:
        data = np.asarray(self.handle.data)
        if data.size == 1:
            return bool(data.reshape(-1)[0])
        if sys._getframe(1).f_code.co_filename != file:
            return True
        raise ValueError(
            f"the truth of a block of {data.size} values is not defined on a GPU (the interpreter would take it as "
            "True): use tl.maximum/tl.minimum for max()/min(), ~ or == 0 for not, & and | for and/or, tl.where for "
            "a condition"
        )

    return of
