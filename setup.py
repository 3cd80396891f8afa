"""The one part of the build pyproject.toml cannot declare: the optional C wire decoder.

``optional=True``: where no C compiler is found the build goes on without it, and
``tracebridge.readers.wire`` decodes with numpy alone (same results, about 2.5x slower
to read a large XSpace).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tracebridge.readers._wirec", ["tracebridge/readers/_wirec.c"],
                             optional=True, extra_compile_args=["-O2"])])
