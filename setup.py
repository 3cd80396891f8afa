"""The one part of the build pyproject.toml cannot declare: the optional C loops of the
protobuf wire format, the decoder and the encoder's record assembly, and a summary's
per-key totals and step breakdown.

``optional=True``: where no C compiler is found the build goes on without them, and
``tracebridge.readers.wire`` decodes with numpy alone (same results, about 2.5x slower
to read a large XSpace), ``tracebridge.writers.protowire`` encodes with numpy alone (the
same bytes; the .pftrace writer takes about twice the time), and a summary adds up its
keys with numpy's scatter-adds and makes its step breakdown's unions with numpy (the same
numbers; on 3M events summarizing takes about three times as long, 0.6 s, and the command's
peak memory is about twice as much), and the writers find the sub-rows of partly overlapping
ops with numpy passes (the same rows; 0.15 s of a 3M-event .pftrace convert, against 0.02 s).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(name, [source], optional=True, extra_compile_args=["-O2"])
                   for name, source in (("tracebridge.readers._wirec", "tracebridge/readers/_wirec.c"),
                                        ("tracebridge.writers._protowirec", "tracebridge/writers/_protowirec.c"),
                                        ("tracebridge.analysis.run._groupc", "tracebridge/analysis/run/_groupc.c"),
                                        ("tracebridge.model._lanesc", "tracebridge/model/_lanesc.c"))])
