"""Writers: the model out to Chrome traces, RunMetadata (binary and text), XSpace and
TensorBoard logdirs, and the HTML views. Each file format's writer has the shape
``write(trace, path, **options)``; :mod:`tracebridge.formats` lists them, with the options
each takes, and ``Trace.save`` picks one by the file's name."""
