"""What a call made while its stream captures a CUDA graph holds: a plan of its own and the arrays it allocated.

A graph keeps the raw addresses its launches were given and its replays write them long after the call returned.
The eager path's plans (a shape's walk list and tickets, Flash-Decoding's partials and tickets) live in bounded
caches, shared by every call of their shape and stream: evicted, their arrays go back to CuPy's pool while a graph
still writes them (a later allocation gets that memory, a replay corrupts it), and a graph replayed on another stream
beside eager calls of its shape would take their tickets. So a call that finds its stream capturing
(cudaStreamIsCapturing) takes a plan made for that capture (`plan`: its own tickets and workspace, never in a cache,
never handed to an eager call) and hands `hold` the arrays it allocated and does not return (a scratch lse, padded
copies, the backward's work arrays); both are held for the life of the process, as a graph may be replayed as long.
Calls of one shape in one capture on one stream share one plan: they run in that stream's order. A graph replayed on
two streams at once races with itself, as any graph's own buffers do."""

import contextlib
import ctypes
import functools

RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED
_plans: dict = {}  # (capture id, stream, make, its arguments) → the plan made for that capture
_held: list = []  # the arrays captured calls allocated and dropped


def capturing(cupy, stream: int) -> bool:
    """Whether `stream` (a raw handle) is capturing a CUDA graph."""
    return cupy.cuda.runtime.streamIsCapturing(stream)


def plan(cupy, stream: int, make, *args):
    """make(*args) (a plan maker's uncached function) made once per capture of `stream` and held. It runs outside
    the graph: on a stream of its own, waited for (its tickets zeroed, its lists copied before the first replay), and
    with this thread's capture mode relaxed, as its arrays may need cudaMalloc, which a capture begun in global mode
    (PyTorch's default) forbids."""
    key = (capture_id(stream), stream, make, args)
    found = _plans.get(key)
    if found is None:
        with relaxed():
            side = _side(cupy, cupy.cuda.runtime.getDevice())
            with side:
                found = _plans[key] = make(*args)
            side.synchronize()
    return found


@functools.cache
def _side(cupy, device_id: int):
    """The stream captured calls' plans are made on, one a device, kept (never destroyed while a capture runs)."""
    return cupy.cuda.Stream(non_blocking=True)


def hold(*arrays) -> None:
    """Keep `arrays` (allocated by a captured call, read or written by its launches) for the life of the process."""
    _held.append(arrays)


def capture_id(stream: int) -> int:
    """The id of the capture sequence `stream` is in (cuStreamGetCaptureInfo)."""
    status, sequence = ctypes.c_int(0), ctypes.c_uint64(0)
    null = ctypes.c_void_p(0)
    err = libcuda().cuStreamGetCaptureInfo_v2(
        ctypes.c_void_p(stream), ctypes.byref(status), ctypes.byref(sequence), null, null, null
    )  # fmt: skip
    if err:
        raise RuntimeError(f"cuStreamGetCaptureInfo failed: CUresult {err}")
    return sequence.value


@contextlib.contextmanager
def relaxed():
    """This thread's stream capture mode relaxed (cuThreadExchangeStreamCaptureMode), then set back."""
    mode = ctypes.c_int(RELAXED)
    _exchange(mode)
    try:
        yield
    finally:
        _exchange(mode)


def _exchange(mode: ctypes.c_int) -> None:
    err = libcuda().cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))
    if err:
        raise RuntimeError(f"cuThreadExchangeStreamCaptureMode failed: CUresult {err}")


@functools.cache
def libcuda():
    """The CUDA driver's library, loaded once."""
    return ctypes.CDLL("libcuda.so.1")
