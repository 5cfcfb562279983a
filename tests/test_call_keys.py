"""A public call is checked once per key and its launch planned once per shape and stream (no GPU needed: fakes of
CuPy): the key is what every check reads, (shape, strides, dtype, device) of each array, and the options (causal,
scale, kernel, tiles); any of them changed, or another stream, and the call is checked or planned anew. A hostile
argument is checked in full on every call. Tensor maps are remembered by address within one shape, and made from
the shape, strides and element size worked out here by hand."""

import contextlib
import types

import ml_dtypes
import numpy as np
import pytest

from gpu import backward, flash, inputs, tma, variants
from sim.core.errors import InputError
from tests import fake_cupy

F16, BF16, F32 = np.dtype("float16"), np.dtype(ml_dtypes.bfloat16), np.dtype("float32")


class FakeArray(fake_cupy.FakeArray):
    """What the public calls read of a CuPy array; one address for all unless given."""

    def __init__(self, shape, dtype=F16, device_id=0, strides=None, ptr=1 << 20):
        super().__init__(shape, dtype, device_id, strides, ptr)


@pytest.fixture
def fake(monkeypatch):
    """A fake CuPy (arrays, allocation, the current stream and device) and the launches the calls make."""
    launches, state = [], types.SimpleNamespace(stream=1, device=0, synced=[])
    stream = lambda device_id=-1: types.SimpleNamespace(ptr=state.stream, synchronize=lambda: state.synced.append(1))  # noqa: E731
    cupy = types.SimpleNamespace(
        ndarray=FakeArray, float32=np.float32, int32=np.int32,
        empty=lambda shape, dtype: FakeArray(shape, dtype), zeros=lambda shape, dtype: FakeArray(shape, dtype),
        empty_like=lambda x: FakeArray(x.shape, x.dtype, x.device.id),
        ascontiguousarray=lambda x: FakeArray(x.shape, x.dtype, x.device.id),
        asarray=lambda x, dtype=None: np.asarray(x),
        cuda=types.SimpleNamespace(
            get_current_stream=stream,
            runtime=types.SimpleNamespace(getDevice=lambda: state.device, streamIsCapturing=lambda stream: False),
            Device=lambda device_id=0: contextlib.nullcontext(),
        ),
    )  # fmt: skip
    fake_cupy.patch_flash(monkeypatch, flash, cupy, lambda *a, **kw: launches.append(a))
    caches = (flash._calls, backward._calls)
    for cache in (*caches, flash.make_plan, flash._device_walk, flash._device_units, backward.make_plan):
        cache.clear() if isinstance(cache, dict) else cache.cache_clear()
    yield types.SimpleNamespace(launches=launches, state=state)
    for cache in (*caches, flash.make_plan, flash._device_walk, flash._device_units, backward.make_plan):
        cache.clear() if isinstance(cache, dict) else cache.cache_clear()


def arrays(shape=(1, 2, 8, 64), dtype=F16, device_id=0, strides=None):
    return [FakeArray(shape, dtype, device_id, strides, ptr=(i + 1) << 24) for i in range(3)]


def test_the_key_is_each_arrays_shape_strides_dtype_and_device_and_the_options(fake):
    q, k, v = arrays()
    # (1, 2, 8, 64) fp16, C-contiguous: strides 2·64·8·2, 2·64·8, 2·64, 2 bytes
    assert inputs.signature(q, k, v) == (((1, 2, 8, 64), (2048, 1024, 128, 2), F16, 0),) * 3
    assert inputs.signature(q, k, np.zeros((1, 2, 8, 64))) is None  # not a CuPy array: checked in full
    assert inputs.plain_options(False, None, None, None) == (False, None, None, None)
    for hostile in (("yes", None, None, None), (False, "0.1", None, None), (False, None, "6", None),
                    (False, True, None, None), (1, None, None, None), (False, None, None, {})):  # fmt: skip
        assert inputs.plain_options(*hostile) is None


def test_a_call_is_checked_once_per_key_and_anew_when_any_part_changes(fake):
    def call(qkv, **options):
        flash.flash_attention(*qkv, **options)
        return len(flash._calls)

    base = arrays()
    assert call(base) == 1 and call(base) == 1 and call(arrays()) == 1  # the same key: checked once
    assert len(fake.launches) == 3
    # the size-1 batch axis may have any stride and the array is still C-contiguous: a new key all the same
    assert call(arrays(strides=(4096, 1024, 128, 2))) == 2
    assert call(arrays(shape=(1, 2, 16, 64))) == 3  # shape
    assert call(arrays(dtype=BF16)) == 4  # dtype
    with pytest.raises(InputError, match="q: dtype float32 is not supported here"):
        call(arrays(dtype=F32))  # refused by rung 6: checked in full, nothing remembered
    assert call(base, causal=True) == 5  # causal
    assert call(base, scale=0.5) == 6  # scale
    assert call(base, kernel=3) == 7  # kernel
    assert call(arrays(device_id=1)) == 8  # device of the arrays
    fake.state.device = 1
    assert call(base) == 9  # the current device (whose compute capability picks the kernel)


def test_a_hostile_call_after_a_remembered_one_is_still_refused_in_one_line(fake):
    q, k, v = arrays()
    flash.flash_attention(q, k, v)
    for args, kw, match in (
        ((q, k, arrays(shape=(1, 2, 9, 64))[0]), {}, "k, v: shapes must be equal"),
        ((q, k, v), {"causal": "yes"}, "causal: expected True or False"),
        ((q, k, v), {"scale": float("nan")}, "scale: expected a positive finite number"),
        ((q, k, v), {"scale": -1}, "scale: expected a positive finite number"),
        ((q, k, FakeArray((1, 2, 8, 64), strides=(2048, 1024, 2, 16))), {}, "v: must be C-contiguous"),
        ((q, k, v), {"return_lse": 1}, "return_lse: expected True or False"),
    ):  # fmt: skip
        with pytest.raises(InputError, match=match):
            flash.flash_attention(*args, **kw)
    assert len(flash._calls) == 1


def test_a_packed_batch_with_host_lengths_is_checked_once_per_lengths(fake, monkeypatch):
    """NumPy cu_seqlens: the call is remembered by the lengths' values (copied to the device once, the stream
    synchronized then); CuPy ones, other integer types of the maxima, or hostile lengths are checked every call."""
    monkeypatch.setattr(flash.tma, "packed_map", lambda x, rows: ("packed", x.data.ptr, rows))
    q, k, v = (FakeArray((300, 2, 64), ptr=(i + 1) << 24) for i in range(3))

    def call(cu, **kw):
        flash.flash_attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, **kw)
        return len(flash._calls)

    cu = np.array([0, 100, 300])
    assert call(cu) == 1 and call(cu) == 1 and call(np.array([0, 100, 300], np.int32)) == 1  # the same values
    assert len(fake.state.synced) == 1 and len(fake.launches) == 3
    assert call(np.array([0, 150, 300])) == 2  # other lengths: checked and copied anew
    assert call(cu, max_seqlen_q=300, max_seqlen_k=300) == 3  # the maxima are part of the key
    assert call(cu, max_seqlen_q=np.int64(300), max_seqlen_k=300) == 3  # a NumPy integer: valid, never remembered
    assert len(fake.state.synced) == 3 and len(fake.launches) == 6  # not remembered: its copy is its own launch's
    assert variants.packed_key(FakeArray((3,), np.int32), cu, None, None) is None  # on the device: read every call
    assert variants.packed_key(cu, cu, None, None) == ((0, 100, 300), (0, 100, 300), None, None)
    for hostile, match in ((np.array([0.0, 100.0, 300.0]), "cu_seqlens_q: must be a 1-D array of at least 2 integers"),
                           (np.array([0, 300, 100]), "cu_seqlens_q: must start at 0, increase strictly"),
                           (np.array([0, 100, 299]), "end at the tensor's 300 rows")):  # fmt: skip
        for _ in range(2):
            with pytest.raises(InputError, match=match):
                call(hostile)
    assert len(flash._calls) == 3
    # the backward of the same batch (rungs 5 and 7 take packed batches): remembered by the lengths' values alike
    o, lse = FakeArray((300, 2, 64), ptr=5 << 24), FakeArray((300, 2), np.float32, ptr=6 << 24)
    for lengths in (cu, np.array([0, 100, 300], np.int32), np.array([0, 150, 300])):
        backward.flash_attention_backward(q, k, v, o, lse, o, cu_seqlens_q=lengths, cu_seqlens_k=lengths)
    assert len(backward._calls) == 2 and len(fake.state.synced) == 5


def test_a_plan_is_made_once_a_stream(fake):
    q, k, v = arrays(shape=(1, 2, 1024, 64))
    flash.flash_attention(q, k, v, causal=True)
    flash.flash_attention(q, k, v, causal=True)
    fake.state.stream = 2
    flash.flash_attention(q, k, v, causal=True)
    (call,) = flash._calls.values()
    assert sorted(call.plans) == [1, 2] and call.plans[1] is not call.plans[2]
    # rung 6 causal at N = 1024 (Br = 128): Tr = 8, 4 pairs a plane, 2 planes; the walk's copy is the stream's own
    walks = [launch[2][-3] for launch in fake.launches]
    assert walks[0] is walks[1] is not walks[2] and len(walks[0]) == 8
    assert [launch[0] for launch in fake.launches] == [(8, 1, 1)] * 3


def test_the_backward_remembers_deterministic_and_plans_with_the_fused_threshold(fake, monkeypatch):
    q, k, v = arrays(shape=(1, 2, 256, 64))
    o, lse = FakeArray(q.shape, ptr=5 << 24), FakeArray((1, 2, 256), np.float32, ptr=6 << 24)
    for deterministic in (False, False, True):
        backward.flash_attention_backward(q, k, v, o, lse, o, deterministic=deterministic)
    assert len(backward._calls) == 2
    assert len(fake.launches) == 9  # pre-pass, main kernel, dQ pass: 2 planes round dQ in a pass of their own
    monkeypatch.setattr(backward, "FUSED_PLANES", 1)
    backward.flash_attention_backward(q, k, v, o, lse, o)
    assert len(fake.launches) == 11  # FUSED_PLANES lowered: planned anew, dQ rounded by the main kernel


def test_tensor_maps_are_remembered_by_address_within_one_shape():
    made = []
    maps = tma.Maps((lambda x, rows: made.append((x.data.ptr, rows)) or len(made), 64), (lambda x, rows: -rows, 128))
    a, b, c = (FakeArray((1, 1, 8, 64), ptr=p) for p in (1 << 20, 2 << 20, 3 << 20))
    assert maps(a, b) == (1, -128) and maps(a, b) == (1, -128) and made == [(1 << 20, 64)]
    assert maps(c, b) == (2, -128) and made[-1] == (3 << 20, 64)  # another address: its own map
    for i in range(tma.Maps.LIMIT):
        maps(FakeArray((1, 1, 8, 64), ptr=(i + 10) << 20), b)
    assert len(maps.known) <= tma.Maps.LIMIT


@pytest.mark.parametrize("packed", [False, True])
def test_a_tensor_map_is_encoded_with_the_strides_of_its_layout(monkeypatch, packed):
    seen = []
    monkeypatch.setattr(tma, "_encode", lambda: lambda *a: seen.append(a) or 0)
    tma._rows_map.cache_clear()
    if packed:  # (total, heads, d) = (300, 4, 64) fp16 seen as (heads, total, d): rows 2·4·64 bytes apart
        tma.packed_map(FakeArray((300, 4, 64)), 128)
        dims, strides = (64, 300, 4), (512, 128)
    else:  # (batch, heads, rows, d) = (2, 3, 300, 64) fp16 seen as (6, 300, 64): rows 128 bytes, planes 128·300
        tma.rows_map(FakeArray((2, 3, 300, 64)), 128)
        dims, strides = (64, 300, 6), (128, 38400)
    (args,) = seen
    assert tuple(args[4]) == dims and tuple(args[5]) == strides and tuple(args[6]) == (64, 128, 1)
    tma._rows_map.cache_clear()
