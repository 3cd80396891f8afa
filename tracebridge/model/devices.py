"""Devices as TensorFlow names them, parsed into their parts.

TensorFlow has written device names in several styles over the years; all of them occur
in real traces:

    /job:worker/replica:0/task:1/device:CPU:0     TF >= 1.3, and TF2
    /job:localhost/replica:0/task:0/cpu:0         TF 1.0 - 1.2
    /gpu:0/stream:all   /gpu:0/stream:12          GPU tracer streams (old style)
    /device:GPU:0/stream:all   /device:GPU:0/memcpy
    /host:CPU   /device:TPU:0                     XSpace planes
    cpu:0  gpu:0                                  device names without a slash (old Chrome traces)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PART = re.compile(r"([A-Za-z_]+):([^/]*)")


@dataclass(frozen=True)
class Device:
    """One device of a trace. Only ``name`` is always known; the parts may be None."""

    name: str
    job: str | None = None
    replica: int | None = None
    task: int | None = None
    type: str | None = None          # "CPU", "GPU", "TPU", ...
    index: int | None = None
    stream: str | None = None        # "all", "12", "memcpy" for GPU tracer lanes
    host: str | None = None          # set for devices of a multi-host capture

    @property
    def kind(self) -> str:
        """"stream" or "memcpy" for GPU tracer devices, "host" for /host:CPU, else "compute"."""
        if self.stream == "memcpy":
            return "memcpy"
        if self.stream is not None:
            return "stream"
        if self.name.startswith("/host:"):
            return "host"
        return "compute"

    @property
    def short_name(self) -> str:
        """A compact label such as ``worker:1/CPU:0`` or ``GPU:0/stream:12``."""
        parts = []
        if self.host:
            parts.append(self.host)
        if self.job is not None:
            parts.append(f"{self.job}:{self.task}" if self.task is not None else self.job)
        if self.type is not None:
            parts.append(f"{self.type}:{self.index}" if self.index is not None else self.type)
        if self.stream is not None:
            parts.append("memcpy" if self.stream == "memcpy" else f"stream:{self.stream}")
        return "/".join(parts) or self.name


def parse_device(name: str, host: str | None = None) -> Device:
    """Split a TensorFlow device name; names that do not parse keep only ``name``."""
    fields: dict = {"name": name, "host": host}
    for segment in name.strip("/").split("/"):
        if segment == "memcpy":
            fields["stream"] = "memcpy"
            continue
        match = _PART.fullmatch(segment)
        if not match:
            continue
        key, value = match.group(1).lower(), match.group(2)
        if key == "job":
            fields["job"] = value
        elif key in ("replica", "task"):
            fields[key] = _int(value)
        elif key == "device":
            # "device:CPU:0" splits as key "device", value "CPU"; the index is after it.
            kind, _, index = segment[len("device:"):].partition(":")
            fields["type"], fields["index"] = kind.upper(), _int(index)
        elif key == "stream":
            fields["stream"] = value
        elif key == "host":
            fields["type"] = value.upper()
        elif key in ("cpu", "gpu", "tpu", "sycl", "xla_cpu", "xla_gpu"):
            fields["type"], fields["index"] = key.upper(), _int(value)
    return Device(**fields)


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None
