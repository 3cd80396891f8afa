"""Lane labels for a view: host threads named by their role, not by their id.

TF2's profiler names a host lane for its thread and the thread's id, ``tf_Compute/
6596184094961`` or ``tf_data_iterator_get_next/-1990981912``: in a view's gutter of 170 px
that reads ``tf_Compu…6596184094961``. The label says what the thread does (``TF compute 2``,
``tf.data 1``, ``Python``), numbered where a device has several of one role; the view keeps
the thread's own name for hover. Lanes that are no threads (``Stream #7(Compute)``, ``XLA
Ops``) keep their names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# (pattern of the thread's name, role), first match wins; patterns match the name before "/<id>".
ROLES = (
    (re.compile(r"python\d*$|MainThread$"), "Python"),
    (re.compile(r"tf_Compute$"), "TF compute"),
    (re.compile(r"tf_data_"), "tf.data"),
    (re.compile(r"tf_XLA"), "XLA compute"),
    (re.compile(r"tf_GPU_Event_Manager$"), "TF GPU events"),
    (re.compile(r"tf_gpu_private"), "TF GPU launch"),
    (re.compile(r"collective_ops$"), "TF collectives"),
)
_THREAD = re.compile(r"(.+)/(-?\d+)$")  # "<thread pool>/<thread id>"


def role(name: str) -> str | None:
    """The role of a thread's lane by its name (``tf_Compute/123`` -> ``TF compute``); a
    thread of no known role goes by its pool's name (``pjrt-tpu-tasks``); None for a lane
    that is no thread named with its id."""
    found = _THREAD.match(name)
    base = found.group(1) if found else name
    for pattern, label in ROLES:
        if pattern.match(base):
            return label
    return base if found else None


def lane_labels(names: Sequence[str]) -> list[str]:
    """Labels for one device's lanes, in order: each thread's role, numbered where several
    lanes share it (``TF compute 1``, ``TF compute 2``); other lanes as they are named."""
    roles = [role(name) for name in names]
    counts: dict[str, int] = {}
    for found in roles:
        if found is not None:
            counts[found] = counts.get(found, 0) + 1
    seen: dict[str, int] = {}
    labels = []
    for name, found in zip(names, roles):
        if found is None:
            labels.append(name)
            continue
        seen[found] = seen.get(found, 0) + 1
        labels.append(f"{found} {seen[found]}" if counts[found] > 1 else found)
    return labels


__all__ = ["lane_labels", "role"]
