"""Probe: HBM read bandwidth against the bytes a grid keeps in flight (Little's law: bandwidth = bytes in
flight / latency until the roof).  The read floor's kernel (validation/read_floor.py: 256 threads a block,
four 16-byte loads in flight a thread, 16 KiB a block) over 1 GiB, with grids of 1 to 32 blocks on 2 to 132
SMs' worth.  Run: PYTHONPATH=. python3 validation/results/profile-decode-h100-2026-11-24/inflight_probe.py"""
import json
import os

import cupy
import torch

from validation.read_floor import SOURCE

fn = cupy.RawModule(code=SOURCE, options=("--std=c++17",)).get_function("read_floor")
n16 = (1 << 30) // 16 // 2                     # each of the two halves (K, V) 512 MiB
bufs = [torch.randint(-1000, 1000, (2, n16 * 4), device="cuda", dtype=torch.int32) for _ in range(2)]
out = torch.empty(1 << 16, device="cuda", dtype=torch.int64)
stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)


def launch(buf, grid_x):
    fn((grid_x, 2), (256,), (cupy.uint64(buf[0].data_ptr()), cupy.uint64(buf[1].data_ptr()), cupy.int64(n16),
                             cupy.uint64(out.data_ptr())), stream=stream)


rows = []
for grid_x in (1, 2, 4, 8, 16, 32, 48, 66, 96, 132, 198, 264, 396, 528):
    blocks = 2 * grid_x
    for i in range(3):
        launch(bufs[i % 2], grid_x)
    torch.cuda.synchronize()
    times = []
    for i in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        launch(bufs[i % 2], grid_x)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    t = sorted(times)[len(times) // 2]
    inflight = blocks * 256 * 4 * 16
    rows.append({"blocks": blocks, "inflight_bytes": inflight, "seconds": t, "bandwidth": (1 << 30) / t,
                 "little_latency_s": inflight / ((1 << 30) / t)})
    print(f"blocks {blocks:5d} inflight {inflight / 2**20:7.2f} MiB  {(1 << 30) / t / 1e12:5.2f} TB/s  "
          f"L = {inflight / ((1 << 30) / t) * 1e9:6.0f} ns")
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "inflight.json"), "w"), indent=1)
