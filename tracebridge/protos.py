"""tracebridge's own protobuf schema for the TensorFlow messages it reads and writes.

Field names and numbers are facts of TensorFlow's wire formats (RunMetadata, StepStats,
Event, XSpace); the schema here is written from those facts, not copied from TF's
``.proto`` files. It is built at import time into a private descriptor pool, so it never
clashes with TensorFlow's generated modules when both are loaded in one process, and it
needs no protoc and no TensorFlow. ``tests/test_protos.py`` checks it against TF's own
descriptors, field by field.

Usage: ``protos.RunMetadata()``, ``protos.XSpace.FromString(data)``; the readers' wire
decoders take their field numbers from here too: ``protos.field_numbers("tensorflow.NodeExecStats")``.
"""

from __future__ import annotations

import types

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_T = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _T.TYPE_DOUBLE, "int64": _T.TYPE_INT64, "uint64": _T.TYPE_UINT64,
    "int32": _T.TYPE_INT32, "uint32": _T.TYPE_UINT32, "bool": _T.TYPE_BOOL,
    "string": _T.TYPE_STRING, "bytes": _T.TYPE_BYTES,
}

# A message is a list of fields: (name, number, type, flags). type is a scalar name, a
# message or enum name in this file, or "map<K,V>". flags: "rep" repeated, "oneof:NAME".
_TF = "tensorflow"
_SCHEMA: dict[str, dict[str, list[tuple]]] = {
    _TF: {
        "AllocationRecord": [("alloc_micros", 1, "int64"), ("alloc_bytes", 2, "int64")],
        "AllocatorMemoryUsed": [
            ("allocator_name", 1, "string"), ("total_bytes", 2, "int64"),
            ("peak_bytes", 3, "int64"), ("live_bytes", 4, "int64"),
            ("allocator_bytes_in_use", 5, "int64"),
            ("allocation_records", 6, "AllocationRecord", "rep"),
        ],
        "AllocationDescription": [
            ("requested_bytes", 1, "int64"), ("allocated_bytes", 2, "int64"),
            ("allocator_name", 3, "string"), ("allocation_id", 4, "int64"),
            ("has_single_reference", 5, "bool"), ("ptr", 6, "uint64"),
        ],
        "TensorShapeProto.Dim": [("size", 1, "int64"), ("name", 2, "string")],
        "TensorShapeProto": [("dim", 2, "TensorShapeProto.Dim", "rep"), ("unknown_rank", 3, "bool")],
        "TensorDescription": [
            ("dtype", 1, "enum:DataType"), ("shape", 2, "TensorShapeProto"),
            ("allocation_description", 4, "AllocationDescription"),
        ],
        "NodeOutput": [("slot", 1, "int32"), ("tensor_description", 3, "TensorDescription")],
        "MemoryStats": [
            ("temp_memory_size", 1, "int64"), ("device_temp_memory_size", 2, "int64"),
            ("persistent_memory_size", 3, "int64"), ("device_persistent_memory_size", 4, "int64"),
            ("persistent_tensor_alloc_ids", 5, "int64", "rep"),
            ("device_persistent_tensor_alloc_ids", 6, "int64", "rep"),
        ],
        "NodeExecStats": [
            ("node_name", 1, "string"), ("all_start_micros", 2, "int64"),
            ("op_start_rel_micros", 3, "int64"), ("op_end_rel_micros", 4, "int64"),
            ("all_end_rel_micros", 5, "int64"), ("memory", 6, "AllocatorMemoryUsed", "rep"),
            ("output", 7, "NodeOutput", "rep"), ("timeline_label", 8, "string"),
            ("scheduled_micros", 9, "int64"), ("thread_id", 10, "uint32"),
            ("referenced_tensor", 11, "AllocationDescription", "rep"),
            ("memory_stats", 12, "MemoryStats"), ("all_start_nanos", 13, "int64"),
            ("op_start_rel_nanos", 14, "int64"), ("op_end_rel_nanos", 15, "int64"),
            ("all_end_rel_nanos", 16, "int64"), ("scheduled_nanos", 17, "int64"),
        ],
        "DeviceStepStats": [
            ("device", 1, "string"), ("node_stats", 2, "NodeExecStats", "rep"),
            ("thread_names", 3, "map<uint32,string>"),
        ],
        "StepStats": [("dev_stats", 1, "DeviceStepStats", "rep")],
        # Graphs are kept only as far as tracebridge uses them: node names, op types,
        # inputs and devices. Other fields survive a parse as unknown fields.
        "NodeDef": [
            ("name", 1, "string"), ("op", 2, "string"), ("input", 3, "string", "rep"),
            ("device", 4, "string"),
        ],
        "GraphDef": [("node", 1, "NodeDef", "rep")],
        "RunMetadata.FunctionGraphs": [
            ("partition_graphs", 1, "GraphDef", "rep"),
            ("pre_optimization_graph", 2, "GraphDef"),
            ("post_optimization_graph", 3, "GraphDef"),
        ],
        "SessionMetadata": [("name", 1, "string"), ("version", 2, "int64")],
        "RunMetadata": [
            ("step_stats", 1, "StepStats"), ("cost_graph", 2, "bytes"),
            ("partition_graphs", 3, "GraphDef", "rep"),
            ("function_graphs", 4, "RunMetadata.FunctionGraphs", "rep"),
            ("session_metadata", 5, "SessionMetadata"),
        ],
        "TaggedRunMetadata": [("tag", 1, "string"), ("run_metadata", 2, "bytes")],
        "LogMessage": [("level", 1, "int32"), ("message", 2, "string")],
        "SessionLog": [("status", 1, "int32"), ("checkpoint_path", 2, "string"), ("msg", 3, "string")],
        "SourceMetadata": [("writer", 1, "string")],
        # Event.summary (field 5) is kept as raw bytes: tracebridge never reads summaries.
        "Event": [
            ("wall_time", 1, "double"), ("step", 2, "int64"),
            ("file_version", 3, "string", "oneof:what"), ("graph_def", 4, "bytes", "oneof:what"),
            ("summary", 5, "bytes", "oneof:what"), ("log_message", 6, "LogMessage", "oneof:what"),
            ("session_log", 7, "SessionLog", "oneof:what"),
            ("tagged_run_metadata", 8, "TaggedRunMetadata", "oneof:what"),
            ("meta_graph_def", 9, "bytes", "oneof:what"),
            ("source_metadata", 10, "SourceMetadata"),
        ],
        # The profiler service's request to end a capture early (session id = run folder name).
        "TerminateRequest": [("session_id", 1, "string")],
        "ProfileOptions": [
            ("include_dataset_ops", 1, "bool"), ("host_tracer_level", 2, "uint32"),
            ("device_tracer_level", 3, "uint32"), ("python_tracer_level", 4, "uint32"),
            ("version", 5, "uint32"), ("device_type", 6, "int32"),
            ("enable_hlo_proto", 7, "bool"), ("start_timestamp_ns", 8, "uint64"),
            ("duration_ms", 9, "uint64"), ("repository_path", 10, "string"),
            ("raise_error_on_start_failure", 13, "bool"), ("session_id", 14, "string"),
            ("override_hostname", 15, "string"),
        ],
    },
    "tensorflow.profiler": {
        "XStat": [
            ("metadata_id", 1, "int64"), ("double_value", 2, "double", "oneof:value"),
            ("uint64_value", 3, "uint64", "oneof:value"), ("int64_value", 4, "int64", "oneof:value"),
            ("str_value", 5, "string", "oneof:value"), ("bytes_value", 6, "bytes", "oneof:value"),
            ("ref_value", 7, "uint64", "oneof:value"),
        ],
        "XEvent": [
            ("metadata_id", 1, "int64"), ("offset_ps", 2, "int64", "oneof:data"),
            ("num_occurrences", 5, "int64", "oneof:data"), ("duration_ps", 3, "int64"),
            ("stats", 4, "XStat", "rep"),
        ],
        "XLine": [
            ("id", 1, "int64"), ("display_id", 10, "int64"), ("name", 2, "string"),
            ("display_name", 11, "string"), ("timestamp_ns", 3, "int64"),
            ("duration_ps", 9, "int64"), ("events", 4, "XEvent", "rep"),
        ],
        "XEventMetadata": [
            ("id", 1, "int64"), ("name", 2, "string"), ("display_name", 4, "string"),
            ("metadata", 3, "bytes"), ("stats", 5, "XStat", "rep"), ("child_id", 6, "int64", "rep"),
        ],
        "XStatMetadata": [("id", 1, "int64"), ("name", 2, "string"), ("description", 3, "string")],
        "XPlane": [
            ("id", 1, "int64"), ("name", 2, "string"), ("lines", 3, "XLine", "rep"),
            ("event_metadata", 4, "map<int64,XEventMetadata>"),
            ("stat_metadata", 5, "map<int64,XStatMetadata>"),
            ("stats", 6, "XStat", "rep"),
        ],
        "XSpace": [
            ("planes", 1, "XPlane", "rep"), ("errors", 2, "string", "rep"),
            ("warnings", 3, "string", "rep"), ("hostnames", 4, "string", "rep"),
        ],
    },
}

# DataType values (TensorFlow's types.proto); the *_REF variants are these plus 100.
DATA_TYPES = [
    "DT_INVALID", "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_UINT8", "DT_INT16", "DT_INT8",
    "DT_STRING", "DT_COMPLEX64", "DT_INT64", "DT_BOOL", "DT_QINT8", "DT_QUINT8", "DT_QINT32",
    "DT_BFLOAT16", "DT_QINT16", "DT_QUINT16", "DT_UINT16", "DT_COMPLEX128", "DT_HALF",
    "DT_RESOURCE", "DT_VARIANT", "DT_UINT32", "DT_UINT64", "DT_FLOAT8_E5M2", "DT_FLOAT8_E4M3FN",
    "DT_FLOAT8_E4M3FNUZ", "DT_FLOAT8_E4M3B11FNUZ", "DT_FLOAT8_E5M2FNUZ", "DT_INT4", "DT_UINT4",
    "DT_INT2", "DT_UINT2", "DT_FLOAT4_E2M1FN",
]


def dtype_name(value: int) -> str:
    """``1`` -> ``"float"``, ``101`` -> ``"float_ref"``; unknown numbers as ``"dtype_<n>"``."""
    base, ref = (value - 100, "_ref") if value > 100 else (value, "")
    if 0 <= base < len(DATA_TYPES):
        return DATA_TYPES[base][3:].lower() + ref
    return f"dtype_{value}"


def dtype_value(name: str) -> int:
    """Inverse of :func:`dtype_name`."""
    ref = name.endswith("_ref")
    base = name[:-4] if ref else name
    if base.startswith("dtype_"):
        return int(base[6:])
    try:
        return DATA_TYPES.index("DT_" + base.upper()) + (100 if ref else 0)
    except ValueError:
        return 0


def _add_field(msg: descriptor_pb2.DescriptorProto, package: str, spec: tuple,
               oneofs: dict[str, int]) -> None:
    name, number, type_name, *flags = spec
    field = msg.field.add(name=name, number=number, json_name=_camel(name))
    field.label = _T.LABEL_REPEATED if "rep" in flags else _T.LABEL_OPTIONAL
    for flag in flags:
        if flag.startswith("oneof:"):
            group = flag[6:]
            if group not in oneofs:
                oneofs[group] = len(msg.oneof_decl)
                msg.oneof_decl.add(name=group)
            field.oneof_index = oneofs[group]
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    elif type_name.startswith("enum:"):
        field.type = _T.TYPE_ENUM
        field.type_name = f".{package}.{type_name[5:]}"
    elif type_name.startswith("map<"):
        key, value = type_name[4:-1].split(",")
        entry = msg.nested_type.add(name=_camel(name, upper=True) + "Entry")
        entry.options.map_entry = True
        _add_field(entry, package, ("key", 1, key), {})
        _add_field(entry, package, ("value", 2, value), {})
        field.label = _T.LABEL_REPEATED
        field.type = _T.TYPE_MESSAGE
        field.type_name = f".{package}.{msg.name}.{entry.name}"
    else:
        field.type = _T.TYPE_MESSAGE
        field.type_name = f".{package}.{type_name}"


def _camel(name: str, upper: bool = False) -> str:
    head, *rest = name.split("_")
    text = head + "".join(part.title() for part in rest)
    return text[:1].upper() + text[1:] if upper else text


def _build_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for package, messages in _SCHEMA.items():
        proto = descriptor_pb2.FileDescriptorProto(
            name=f"tracebridge/{package.replace('.', '_')}.proto", package=package, syntax="proto3")
        if package == _TF:
            enum = proto.enum_type.add(name="DataType")
            for number, name in enumerate(DATA_TYPES):
                enum.value.add(name=name, number=number)
            for number, name in enumerate(DATA_TYPES[1:], start=101):
                enum.value.add(name=name + "_REF", number=number)
        by_name: dict[str, descriptor_pb2.DescriptorProto] = {}
        for full, fields in messages.items():
            outer, _, inner = full.partition(".")
            if outer not in by_name:  # a nested message may be listed before its parent
                by_name[outer] = proto.message_type.add(name=outer)
            msg = by_name[outer].nested_type.add(name=inner) if inner else by_name[outer]
            oneofs: dict[str, int] = {}
            for spec in fields:
                _add_field(msg, package, spec, oneofs)
        pool.Add(proto)
    return pool


POOL = _build_pool()


def _message(full_name: str):
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(full_name))


def field_numbers(full_name: str) -> types.SimpleNamespace:
    """A message's field numbers by field name, from its descriptor (the schema above):
    ``field_numbers("tensorflow.NodeExecStats").all_start_nanos == 13``. Map fields have
    an entry message of their own: ``"tensorflow.DeviceStepStats.ThreadNamesEntry"``."""
    fields = POOL.FindMessageTypeByName(full_name).fields_by_name
    return types.SimpleNamespace(**{name: field.number for name, field in fields.items()})


RunMetadata = _message("tensorflow.RunMetadata")
StepStats = _message("tensorflow.StepStats")
DeviceStepStats = _message("tensorflow.DeviceStepStats")
NodeExecStats = _message("tensorflow.NodeExecStats")
GraphDef = _message("tensorflow.GraphDef")
TensorShapeProto = _message("tensorflow.TensorShapeProto")
Event = _message("tensorflow.Event")
ProfileOptions = _message("tensorflow.ProfileOptions")
TerminateRequest = _message("tensorflow.TerminateRequest")
XSpace = _message("tensorflow.profiler.XSpace")
XPlane = _message("tensorflow.profiler.XPlane")
