"""Generate a synthetic RunMetadata of N node_stats for the StepStats benchmarks.

Shape (the issue's benchmark spec): 4 devices x 4 threads; labels ``name = Op(in0, in1)``
where about 5% of inputs come from another device (``/_k`` suffixed, as partitioning
names them); one ``memory`` entry with two allocation records and one ``output`` per node;
nanosecond and micros fields filled as TF 2.21 fills them.

    python bench/gen_stepstats.py 1000000 out.pb
"""

from __future__ import annotations

import random
import sys

from tracebridge import protos

DEVICES = [f"/job:worker/replica:0/task:{t}/device:CPU:0" for t in range(4)]
OPS = ["MatMul", "AddV2", "Relu", "Mul", "Conv2D", "BiasAdd", "Sum", "Identity"]


def generate(n: int, seed: int = 0):
    rng = random.Random(seed)
    run_metadata = protos.RunMetadata()
    per_device = n // len(DEVICES)
    base_ns = 1_700_000_000_000_000_000
    for d, device in enumerate(DEVICES):
        dev_stats = run_metadata.step_stats.dev_stats.add(device=device)
        clocks = [base_ns] * 4
        for i in range(per_device):
            thread = i % 4
            name = f"d{d}/layer{i // 50}/op{i}"
            op = OPS[i % len(OPS)]
            inputs = []
            for k in (1, 2):
                if i - k < 0:
                    continue
                if rng.random() < 0.05:
                    other = (d + 1) % len(DEVICES)
                    inputs.append(f"d{other}/layer{(i - k) // 50}/op{i - k}/_{rng.randrange(100)}")
                else:
                    inputs.append(f"d{d}/layer{(i - k) // 50}/op{i - k}")
            start = clocks[thread] + rng.randrange(200, 2_000)
            duration = rng.randrange(500, 20_000)
            clocks[thread] = start + duration
            node = dev_stats.node_stats.add(
                node_name=name, timeline_label=f"{name} = {op}({', '.join(inputs)})",
                all_start_nanos=start, all_start_micros=start // 1000,
                op_start_rel_nanos=100, op_end_rel_nanos=duration - 100, all_end_rel_nanos=duration,
                scheduled_nanos=start - 500, scheduled_micros=(start - 500) // 1000,
                thread_id=thread)
            node.op_start_rel_micros = (start + 100) // 1000 - start // 1000
            node.op_end_rel_micros = (start + duration - 100) // 1000 - start // 1000
            node.all_end_rel_micros = (start + duration) // 1000 - start // 1000
            size = 4 * rng.choice((64, 256, 1024, 4096))
            used = node.memory.add(allocator_name="cpu", total_bytes=size, peak_bytes=size,
                                   live_bytes=size, allocator_bytes_in_use=size * 10)
            used.allocation_records.add(alloc_micros=start // 1000, alloc_bytes=size)
            used.allocation_records.add(alloc_micros=(start + duration) // 1000, alloc_bytes=-size)
            description = node.output.add().tensor_description
            description.dtype = 1
            description.shape.dim.add(size=size // 4)
            allocation = description.allocation_description
            allocation.requested_bytes = size
            allocation.allocated_bytes = size
            allocation.allocator_name = "cpu"
    return run_metadata


def main(argv: list[str]) -> None:
    n, path = int(argv[1]), argv[2]
    data = generate(n).SerializeToString()
    with open(path, "wb") as handle:
        handle.write(data)
    print(f"{path}: {n} nodes, {len(data) / 1e6:.1f} MB")


if __name__ == "__main__":
    main(sys.argv)
