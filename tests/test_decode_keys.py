"""`gpu.decode` is checked once per key and its launch planned once per key and stream (no GPU needed: a fake CuPy
whose launches are recorded): the key is what every check reads, (shape, strides, dtype, device) of each array, and
causal, scale, splits of the exact types a valid call passes; any of them changed and the call is checked anew, a
hostile one refused; another stream, and the launch is planned anew. What must be done per call still is: the
arrays' addresses reach the kernel, a NumPy block table's values are checked, a block table of another integer type
is converted."""

import functools
import types

import ml_dtypes
import numpy as np
import pytest

from gpu import decode_launch, decoding, pages
from sim.core.errors import InputError
from sim.machine import hardware
from tests import fake_cupy

F16, BF16 = np.dtype("float16"), np.dtype(ml_dtypes.bfloat16)
Device, FakeArray = fake_cupy.Device, fake_cupy.FakeArray


@pytest.fixture
def fake(monkeypatch):
    """A fake CuPy; the launches queued (the parameters the kernel gets) and the calls checked and planned."""
    state = types.SimpleNamespace(stream=7, launches=[], checked=0, planned=0)

    def launch(function, gx, gy, gz, bx, by, bz, smem, stream, address, *extra):
        state.launches.append((function, (gx, gy, gz), bx, smem, stream, tuple(decode_launch._params.buffer[0])))

    cupy = types.SimpleNamespace(
        ndarray=FakeArray, float32=np.float32, int32=np.int32,
        empty=lambda shape, dtype: FakeArray(shape, dtype), zeros=lambda shape, dtype: FakeArray(shape, dtype),
        clip=lambda x, low, high: x, ascontiguousarray=lambda x: FakeArray(x.shape, x.dtype, x.device.id),
        asarray=lambda x: FakeArray(np.shape(x), np.asarray(x).dtype),
        cuda=types.SimpleNamespace(
            get_current_stream=lambda device_id=-1: types.SimpleNamespace(ptr=state.stream), Device=Device,
            driver=types.SimpleNamespace(launchKernel=launch, launchCooperativeKernel=launch),
            runtime=types.SimpleNamespace(streamIsCapturing=lambda stream: False),
        ),
    )  # fmt: skip
    monkeypatch.setattr(decoding.device, "require", lambda: cupy)
    monkeypatch.setattr(decoding, "_hardware", lambda device_id: hardware.get(hardware.DEFAULT))
    flags, claim = np.zeros(pages.ERRORS, np.int32), FakeArray((1,), np.int32)
    monkeypatch.setattr(pages, "errors", lambda device_id: (flags, np.uintp(0xE0000), claim))
    kernel = types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=0xF000))

    def kernels(d, dtype, rows, tiles=None, cluster=1, spread=False, page_size=0):
        return kernel, None, types.SimpleNamespace(threads=128), 1000 * d + cluster

    monkeypatch.setattr(decode_launch, "kernels", kernels)
    monkeypatch.setattr(decode_launch, "merge_for", lambda *args: "ticket")
    prepare, plan = decoding._prepare, decode_launch.plan.__wrapped__

    def counted_prepare(*args):
        state.checked += 1
        return prepare(*args)

    def counted_plan(*args):
        state.planned += 1
        return plan(*args)

    monkeypatch.setattr(decoding, "_prepare", counted_prepare)
    monkeypatch.setattr(decode_launch, "plan", functools.lru_cache(maxsize=256)(counted_plan))  # a fresh cache
    monkeypatch.setattr(decoding, "_checked", {})
    monkeypatch.setattr(decode_launch, "_workspaces", decode_launch._workspaces.__class__())
    return state


def contiguous(batch=2, hq=8, hkv=2, nk=300, d=64, dtype=F16):
    """q (B, Hq, 1, d), k, v (B, Hkv, Nk, d)."""
    return (
        FakeArray((batch, hq, 1, d), dtype),
        FakeArray((batch, hkv, nk, d), dtype),
        FakeArray((batch, hkv, nk, d), dtype),
    )


def paged(batch=2, pages_per=3, page_size=16, table_dtype=np.int32):
    """q, the paged k, v (num_pages, page_size, Hkv, d), block_table (B, pages per sequence), cache_seqlens (B,)."""
    q = FakeArray((batch, 8, 1, 64))
    k, v = (FakeArray((batch * pages_per, page_size, 2, 64)) for _ in range(2))
    return q, k, v, FakeArray((batch, pages_per), table_dtype), FakeArray((batch,), table_dtype)


def test_a_repeated_call_is_checked_and_planned_once_and_gets_its_own_addresses(fake):
    q, k, v = contiguous()
    decoding.decode(q, k, v, splits=3)
    q2, k2, v2 = contiguous()
    decoding.decode(q2, k2, v2, splits=3)
    assert (fake.checked, fake.planned) == (1, 1)
    first, second = (launch[-1] for launch in fake.launches)
    assert first[:3] == (q.data.ptr, k.data.ptr, v.data.ptr) and second[:3] == (q2.data.ptr, k2.data.ptr, v2.data.ptr)
    assert first[3:5] == second[3:5] == (0, 0)  # no block table, no lengths
    assert first[5:7] != second[5:7]  # o and lse: each call's own
    assert first[7:] == second[7:]  # the partials, tickets, error report and scalars: planned once
    # the scalars: Nq 1, g 4, Nk 300, page_size 0, max_pages 0, num_pages 0, splits 3, τ·log2 e as float32, causal
    tau = np.float32(np.log2(np.e) / 8.0).view(np.uint32)
    assert first[12:] == (1, 4, 300, 0, 0, 0, 3, int(tau), 0)
    assert fake.launches[0][1] == (3, 2, 2)  # (splits, Hkv, B)


def test_another_stream_is_planned_anew_not_checked_anew(fake):
    q, k, v = contiguous()
    decoding.decode(q, k, v)
    fake.stream = 8
    decoding.decode(q, k, v)
    decoding.decode(q, k, v)
    assert (fake.checked, fake.planned) == (1, 2)
    assert [launch[4] for launch in fake.launches] == [7, 8, 8]


@pytest.mark.parametrize(
    "change",
    [
        {"q": FakeArray((2, 8, 2, 64))},  # another Nq
        {"k": FakeArray((2, 2, 301, 64)), "v": FakeArray((2, 2, 301, 64))},  # another Nk
        dict(zip("qkv", contiguous(dtype=BF16), strict=True)),
        {"q": FakeArray((2, 8, 1, 64), strides=(8 * 64 * 2, 64 * 2, 2, 2))},  # a size-1 axis of another stride
        {"causal": True},
        {"scale": 0.5},
        {"scale": 1},
        {"splits": 4},
    ],
    ids=["shape q", "shape kv", "dtype", "strides", "causal", "scale", "scale int", "splits"],
)
def test_the_key_changes_with_each_thing_the_checks_read(fake, change):
    q, k, v = contiguous()
    base = {"q": q, "k": k, "v": v, "splits": 3}
    for _ in range(2):
        decoding.decode(**base)
    for _ in range(2):
        decoding.decode(**(base | change))
    assert fake.checked == 2


@pytest.mark.parametrize(
    "change, match",
    [
        ({"k": FakeArray((2, 2, 300, 64), strides=(2 * 300 * 256, 300 * 256, 256, 2))}, "k: must be C-contiguous"),
        ({"k": FakeArray((2, 2, 300, 64), np.float32)}, "k: dtype float32 is not supported"),
        ({"v": FakeArray((2, 2, 299, 64))}, "k, v: shapes must be equal"),
        ({"v": FakeArray((2, 2, 300, 64), device_id=1)}, "v: is on device 1"),
        ({"scale": float("nan")}, "scale: expected a positive finite"),
        ({"scale": [1.0]}, "scale: expected a positive finite"),
        ({"splits": 0}, "splits: expected an integer"),
        ({"splits": 129}, "splits: expected an integer"),
        ({"k": FakeArray((2, 2, 50, 64)), "v": FakeArray((2, 2, 50, 64)), "splits": 60}, "splits: 60 chunks"),
        ({"causal": 1}, "causal: expected True or False"),
    ],
)
def test_a_hostile_call_after_a_remembered_one_is_refused(fake, change, match):
    q, k, v = contiguous()
    base = {"q": q, "k": k, "v": v, "splits": 3}
    decoding.decode(**base)
    for _ in range(2):  # refused each time: a refusal is never remembered
        with pytest.raises(InputError, match=match):
            decoding.decode(**(base | change))
    assert len(decoding._checked) == 1


def test_options_of_other_types_are_checked_every_call(fake):
    """np.int64 splits, np.float64 scale: valid, but in no key (their types are not the exact ones)."""
    q, k, v = contiguous()
    for _ in range(2):
        decoding.decode(q, k, v, splits=np.int64(3), scale=np.float64(0.5))
    assert fake.checked == 2 and not decoding._checked
    assert fake.planned == 1  # planned once all the same: the plan's key is the checked shape


def test_paged_cupy_arrays_go_to_the_kernel_every_call(fake):
    q, k, v, table, seqlens = paged()
    decoding.decode(q, k, v, block_table=table, cache_seqlens=seqlens)
    table2, seqlens2 = FakeArray(table.shape, np.int32), FakeArray(seqlens.shape, np.int32)
    decoding.decode(q, k, v, block_table=table2, cache_seqlens=seqlens2)
    assert (fake.checked, fake.planned) == (1, 1)
    assert [launch[-1][3:5] for launch in fake.launches] == [
        (table.data.ptr, seqlens.data.ptr), (table2.data.ptr, seqlens2.data.ptr)]  # fmt: skip
    assert fake.launches[0][-1][12:17] == (1, 4, 48, 16, 3)  # Nq, g, the table's keys, page_size, pages per sequence


def test_a_paged_table_of_another_integer_type_is_converted_every_call(fake, monkeypatch):
    converted = []
    monkeypatch.setattr(pages, "as_int32", lambda cupy, x: converted.append(x) or FakeArray(x.shape, np.int32))
    q, k, v, table, seqlens = paged(table_dtype=np.int64)
    for _ in range(2):
        decoding.decode(q, k, v, block_table=table, cache_seqlens=seqlens)
    assert fake.checked == 1 and converted[-2:] == [table, seqlens] and len(converted) == 4
    table32 = paged()[3]
    decoding.decode(q, k, v, block_table=table32, cache_seqlens=seqlens)  # another dtype: another key
    assert fake.checked == 2


def test_a_numpy_block_table_is_checked_every_call(fake):
    q, k, v, *_ = paged()
    table, seqlens = np.array([[0, 1, 2], [3, 4, 5]], np.int32), np.array([40, 48], np.int32)
    decoding.decode(q, k, v, block_table=table, cache_seqlens=seqlens)
    table[1, 2] = 6  # past the 6 pages: read by sequence 1's 48 keys
    with pytest.raises(InputError, match=r"block_table: entry \[1, 2\] = 6"):
        decoding.decode(q, k, v, block_table=table, cache_seqlens=seqlens)
    assert fake.checked == 2 and not decoding._checked


@pytest.mark.parametrize(
    ("splits", "nk", "page_size", "blocks_per_sm", "takes"),
    [
        (16, 4096, 0, 128 / 132, True),  # contiguous: 256 keys a split
        (16, 32768, 0, 128 / 132, False),  # 2048 keys a split
        (4, 4096, 0, 1, True),  # 1024: the most a cluster takes
        (4, 4097, 0, 1, False),  # 1025 the longest
        (4, 4096, 0, 2, True),  # contiguous: the grid's size is not asked
        (17, 4096, 0, 1, False),  # past MAX_CLUSTER
        (1, 100, 0, 1, False),  # one split: nothing to merge
        (16, 4096, 256, 128 / 132, True),  # paged: 16 pages, one a split (B 1, Nk 4K of the decode bench)
        (8, 4096, 256, 256 / 132, False),  # the same at B 4: 8 splits of 2 pages, two blocks an SM (run 42-dec7)
        (16, 32768, 256, 1, False),  # 128 pages, 8 a split: 2048 keys
        (4, 4096, 256, 1, True),  # 16 pages, 4 a split: 1024 keys
        (4, 4097, 256, 1, False),  # 17 pages: the longest split holds ⌈17 / 4⌉ = 5, 1280 keys
        (16, 3072, 256, 1, True),  # 12 pages for 16 splits: one page each, four splits empty
        (3, 96, 16, 1, True),  # 6 pages, 2 a split: 32 keys
        (16, 3000, 100, 1, True),  # 30 pages, ⌈30 / 16⌉ = 2 a split: 200 keys
        (2, 4096, 2048, 1, False),  # 2 pages of 2048 keys
    ],
)
def test_cluster_takes_splits_of_at_most_1024_keys(splits, nk, page_size, blocks_per_sm, takes):
    """The cluster's rule by hand: 2 … 16 splits whose longest holds ≤ 1024 keys, a paged split being whole pages (the
    kernel deals ⌈pages / min(splits, pages)⌉ pages to the longest), a paged grid at most one block an SM."""
    assert decode_launch.clustered(splits, nk, page_size, blocks_per_sm) is takes
