"""tracebridge's own schema matches TensorFlow's messages on the wire, field by field."""

from __future__ import annotations

import pytest

from tracebridge import protos


def _fields(descriptor):
    return {f.name: (f.number, f.type, f.is_repeated) for f in descriptor.fields}


@pytest.mark.parametrize("ours, theirs", [
    ("RunMetadata", "tensorflow.core.protobuf.config_pb2.RunMetadata"),
    ("StepStats", "tensorflow.core.framework.step_stats_pb2.StepStats"),
    ("DeviceStepStats", "tensorflow.core.framework.step_stats_pb2.DeviceStepStats"),
    ("NodeExecStats", "tensorflow.core.framework.step_stats_pb2.NodeExecStats"),
    ("Event", "tensorflow.core.util.event_pb2.Event"),
    ("XSpace", "tensorflow.tsl.profiler.protobuf.xplane_pb2.XSpace"),
    ("XPlane", "tensorflow.tsl.profiler.protobuf.xplane_pb2.XPlane"),
    ("ProfileOptions", "tensorflow.tsl.profiler.protobuf.profiler_options_pb2.ProfileOptions"),
])
def test_schema_matches_tensorflow(tf, ours, theirs):
    import importlib
    module, _, name = theirs.rpartition(".")
    tf_message = getattr(importlib.import_module(module), name)
    mine, reference = getattr(protos, ours).DESCRIPTOR, tf_message.DESCRIPTOR
    assert mine.full_name == reference.full_name

    def walk(a, b, seen):
        if a.full_name in seen:
            return
        seen.add(a.full_name)
        theirs_fields = _fields(b)
        for field in a.fields:
            number, kind, repeated = theirs_fields[field.name]
            assert field.number == number, (a.full_name, field.name)
            assert field.is_repeated == repeated, (a.full_name, field.name)
            if field.message_type is not None and b.fields_by_name[field.name].message_type is not None:
                walk(field.message_type, b.fields_by_name[field.name].message_type, seen)
            elif kind in (9, 12) and field.type in (9, 12):
                pass  # string vs bytes: the same wire type; a sub-message kept as bytes is too
            elif b.fields_by_name[field.name].message_type is not None:
                assert field.type == 12, (a.full_name, field.name)  # kept as raw bytes on purpose
            else:
                assert field.type == kind or {field.type, kind} <= {5, 13, 14}, (a.full_name, field.name)

    walk(mine, reference, set())


def test_dtype_names():
    assert protos.dtype_name(1) == "float" and protos.dtype_name(101) == "float_ref"
    assert protos.dtype_value("float_ref") == 101 and protos.dtype_value("dtype_99") == 99
