"""gpu.autograd's flash path is checked once per key (no GPU needed: fakes of PyTorch's tensors and CuPy): the key is
what the CuPy views and inputs.check read of q, k, v (shape, stride, dtype, device), causal and scale, the current
device and both resolves; any of them changed and the step is checked anew; options not of a valid call's exact
types are checked every call. Views are remembered by (address, shape, dtype, device) and own nothing."""

import types

import numpy as np
import pytest

from gpu import autograd_plan, backward, flash, inputs
from sim.core.errors import InputError


class Tensor:
    """What autograd_plan reads of a contiguous torch tensor."""

    def __init__(self, shape, dtype="float16", device=0, stride=None, ptr=1 << 20):
        self.shape, self.dtype, self.device, self.ptr = tuple(shape), dtype, device, ptr
        self._stride = stride or tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))

    def stride(self):
        return self._stride

    def get_device(self):
        return self.device

    def data_ptr(self):
        return self.ptr


@pytest.fixture
def fake(monkeypatch):
    """The checks counted (each returns a Problem of q's shape), the current device, the views made."""
    state = types.SimpleNamespace(device=0, checks=0, views=[])
    cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: state.device))
    )
    spec = types.SimpleNamespace(dtypes=("float16",), row=lambda d: d)

    def check(q, k, v, *, causal, scale, dtypes_allowed):
        state.checks += 1
        inputs.check_flag("causal", causal)
        b, h, n, d = q.shape
        return inputs.Problem(b, h, n, k.shape[2], d, "float16", causal, inputs.check_scale(scale, d))

    def unowned(ptr, shape, dtype, device_id):
        state.views.append((ptr, shape, dtype, device_id))
        return types.SimpleNamespace(shape=shape, ptr=ptr, device_id=device_id)

    monkeypatch.setattr(autograd_plan.device, "require", lambda: cupy)
    monkeypatch.setattr(autograd_plan.inputs, "check", check)
    monkeypatch.setattr(autograd_plan, "unowned", unowned)
    monkeypatch.setattr(autograd_plan, "cupy_view", lambda t: ("dlpack's", t))
    monkeypatch.setattr(autograd_plan, "_cupy_dtype", lambda dtype: dtype)
    monkeypatch.setattr(flash, "resolve", lambda kernel, d: spec)
    autograd_plan.forget()
    yield state
    autograd_plan.forget()


def qkv(shape=(1, 2, 8, 64), **kw):
    return [Tensor(shape, ptr=(i + 1) << 24, **kw) for i in range(3)]


def test_one_check_per_key_and_a_new_one_for_each_thing_the_checks_read(fake, monkeypatch):
    q, k, v = qkv()
    first = autograd_plan.step(q, k, v, False, None)
    assert autograd_plan.step(*qkv(), False, None) is first and fake.checks == 1  # other addresses, same key
    assert first.p == inputs.Problem(1, 2, 8, 8, 64, "float16", False, 1 / 8)
    changed = [
        (qkv((1, 2, 16, 64)), False, None),  # shape
        ([Tensor((1, 2, 8, 64), stride=(4096, 512, 64, 1)), k, v], False, None),  # a size-1 axis' stride
        ([Tensor((1, 2, 8, 64), dtype="bfloat16"), k, v], False, None),  # dtype
        ([q, k, Tensor((1, 2, 8, 64), device=1)], False, None),  # device
        ((q, k, v), True, None),  # causal
        ((q, k, v), False, 0.5),  # scale
        ((q, k, v), False, 1),  # scale, an int
    ]
    for n, (arrays, causal, scale) in enumerate(changed, start=2):
        assert autograd_plan.step(*arrays, causal, scale) is not first
        assert fake.checks == n
        assert autograd_plan.step(*arrays, causal, scale) is not first and fake.checks == n  # then remembered
    fake.device = 1  # the current device: its compute capability picks the kernels
    assert autograd_plan.step(q, k, v, False, None) is not first and fake.checks == len(changed) + 2
    fake.device = 0
    monkeypatch.setattr(backward, "resolve", lambda kernel, d, variant=None: None)  # a tool swapped a resolve
    assert autograd_plan.step(q, k, v, False, None) is not first and fake.checks == len(changed) + 3


def test_options_not_of_a_valid_calls_types_are_checked_every_call(fake):
    q, k, v = qkv()
    for _ in range(2):
        with pytest.raises(InputError, match="causal: expected True or False"):
            autograd_plan.step(q, k, v, 1, None)
        autograd_plan.step(q, k, v, False, np.float64(0.5))  # a float, not exactly one: valid, never remembered
    assert fake.checks == 4
    for _ in range(2):  # a NaN scale never equals itself: it finds no remembered step
        with pytest.raises(InputError, match="scale: expected a positive finite number"):
            autograd_plan.step(q, k, v, False, float("nan"))
    assert fake.checks == 6 and not autograd_plan._steps


def test_views_are_remembered_by_address_shape_dtype_and_device(fake):
    t = Tensor((1, 2, 8, 64))
    a = autograd_plan.view(t)
    assert autograd_plan.view(Tensor((1, 2, 8, 64))) is a and fake.views == [(1 << 20, (1, 2, 8, 64), "float16", 0)]
    others = [Tensor((1, 2, 8, 64), ptr=2 << 20), Tensor((2, 1, 8, 64)), Tensor((1, 2, 8, 64), "bfloat16"),
              Tensor((1, 2, 8, 64), device=1)]  # fmt: skip
    assert all(autograd_plan.view(x) is not a for x in others) and len(fake.views) == 5
    cpu = Tensor((1, 2, 8, 64), device=-1)
    assert autograd_plan.view(cpu) == ("dlpack's", cpu) and len(fake.views) == 5  # a CPU tensor: not remembered
