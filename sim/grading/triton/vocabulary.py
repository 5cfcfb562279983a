"""The names of Triton's language a kernel file may use (`allowlist` checks each node against them), and what a
refusal of any other attribute says: the name refused and, where one helps, what to write instead.
"""

import ast

TL = frozenset(
    """
    arange zeros zeros_like full load store dot trans permute reshape view broadcast_to expand_dims ravel
    where maximum minimum max min sum argmax argmin exp exp2 log log2 sqrt rsqrt abs fma fdiv div_rn cdiv
    program_id num_programs make_block_ptr advance atomic_add atomic_max atomic_min static_range range
    static_assert static_print device_print device_assert constexpr multiple_of max_contiguous max_constancy
    float16 bfloat16 float32 float64 int1 int8 int16 int32 int64 uint8 uint16 uint32 uint64 cast join split
    interleave cat clamp sigmoid softmax cumsum cumprod floor ceil cos sin erf flip math reduce
    associative_scan debug_barrier assume xor_sum sort make_tensor_descriptor
""".split()
)  # triton.language's public kernel API; not core, extra, inline_asm_elementwise, tensor (but as an annotation), dtype
TL_MATH = frozenset("exp exp2 log log2 sqrt rsqrt abs fma div_rn fdiv floor ceil cos sin erf max min".split())
TENSOR = frozenset(
    """
    T abs advance argmax argmin broadcast_to cast cdiv ceil cos cumprod cumsum erf exp exp2 expand_dims flip
    floor log log2 max min permute ravel reshape rsqrt sigmoid sin softmax split sqrt sum to trans view
    dtype shape type element_ty numel load store
""".split()
)  # a tensor's (or a tensor descriptor's) methods and what it says of itself; never .handle. `.type` is a tl.dtype,
# pointer_type or block_type, whose names here are element_ty, numel and shape (checked under Triton 3.9)
MATH = frozenset("pi e inf tau log log2 sqrt exp".split())
TRITON = frozenset(("jit", "cdiv", "language"))
BUILTINS = frozenset("range float int bool min max abs len print True False None NotImplementedError".split())
INSTEAD = {
    "handle": ": it is the interpreter's raw array or pointer, which a GPU's tensor does not have; read and write "
    "through tl.load and tl.store, ask x.dtype or x.shape",
    "tensor": " but as a parameter's annotation (x: tl.tensor); make a tensor with tl.zeros, tl.full or tl.load",
    "core": "; write tl.NAME",
    "extra": "; the math functions are tl.math's (tl.math.exp)",
    "dtype": "; name one (tl.float32) or ask a tensor's (x.dtype)",
}


def chain(node) -> str:
    """`a.b.c` for an attribute chain rooted at a name, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def refusal(node: ast.Attribute, aliases: dict[str, str], annotation: bool = False) -> str:
    """Why the attribute `node` is refused, or "": `tl.x`, `tl.math.x`, `triton.x`, `math.x`, or a tensor's own
    method or property (`tl.tensor` too where it annotates a parameter)."""
    if node.attr.startswith("_"):
        return f".{node.attr}: a kernel may not reach private or dunder attributes"
    names = chain(node).split(".") if chain(node) else []
    module = aliases.get(names[0]) if names else None
    if module == "triton" and len(names) > 2 and names[1] == "language":
        module, names = "triton.language", names[1:]
    if module == "triton.language":
        allowed = (len(names) == 2 and (names[1] in TL or (annotation and names[1] == "tensor"))) or (
            len(names) == 3 and names[1] == "math" and names[2] in TL_MATH
        )
        known = ("; tl.math's are " + ", ".join(sorted(TL_MATH))) if names[1:2] == ["math"] else ""
    elif module == "triton":
        allowed, known = len(names) == 2 and names[1] in TRITON, "; triton's are jit, cdiv, language"
    elif module == "math":
        allowed, known = len(names) == 2 and names[1] in MATH, "; math's are " + ", ".join(sorted(MATH))
    else:
        allowed, known = node.attr in TENSOR, "; a tensor's are its methods (x.to, x.trans), dtype, shape, type"
    if allowed:
        return ""
    what = ".".join(names) if names else f".{node.attr}"
    instead = next((INSTEAD[n] for n in [*names[1:], node.attr] if n in INSTEAD), known)
    return f"{what} is not part of Triton's language a kernel may use{instead}"
