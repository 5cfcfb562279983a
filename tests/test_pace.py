"""gpu.lab.pace's summary of its samples, on hand-made ones (the probe itself runs on a GPU only)."""

from gpu.lab.pace import summary


def _sample(mode: str, events: float, host: float, mhz: float, per_call=None) -> dict:
    return {"mode": mode, "events_us": events, "host_us": host, "gpu_mhz": mhz} | (
        {"per_call_us": per_call} if per_call is not None else {}
    )


def test_summary_takes_medians_by_mode_and_the_stamped_calls_spread():
    samples = [
        _sample("queued", 36.0, 35.8, 1980.0),
        _sample("queued", 22.0, 21.9, 1995.0),
        _sample("queued", 30.0, 29.9, 2010.0),
        _sample("stamped", 31.0, 30.9, 1990.0, per_call=[float(x) for x in range(1, 11)]),
        _sample("preloaded", 17.0, 29.0, 2000.0),
    ]
    out = summary({"samples": samples, "graph_us": 16.3})
    assert out["queued"] == {"events_us": 30.0, "host_us": 29.9, "gpu_mhz": 1995.0}
    assert out["preloaded"] == {"events_us": 17.0, "host_us": 29.0, "gpu_mhz": 2000.0}
    # ten calls 1 … 10 µs sorted: the 10th, 50th and 90th percentiles are calls 2, 6 and 10 (index n·q // 10)
    assert out["stamped"]["per_call_p10_p50_p90"] == [2.0, 6.0, 10.0]
    assert out["graph_us"] == 16.3
