"""Writing outputs safely: a temporary file beside the target, renamed into place only
when everything was written. An error, a full disk or an interrupt leaves no partial file."""

from __future__ import annotations

import contextlib
import gzip
import os
from collections.abc import Iterator
from typing import IO

from .errors import OutputError


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, compress: bool | None = None) -> Iterator[IO[bytes]]:
    """A binary stream to a temporary file next to ``path``, renamed to ``path`` when the
    block ends without error. ``compress``: gzip it (default: when the name ends in ``.gz``).
    Raises :class:`OutputError` when the file cannot be written."""
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    if compress is None:
        compress = target.endswith(".gz")
    if os.path.isdir(target):
        raise OutputError(f"{target}: is a directory")
    fd, temporary = _create_temporary(target, directory)
    try:
        with os.fdopen(fd, "wb") as raw:
            if compress:
                # mtime=0 keeps gzip output byte-for-byte deterministic.
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=5, mtime=0) as zipped:
                    yield zipped
            else:
                yield raw
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except OutputError:  # raised by the writer inside the block: already one clear line
        _remove(temporary)
        raise
    except OSError as error:
        _remove(temporary)
        raise OutputError(f"{target}: write failed ({error.strerror or error})") from None
    except BaseException:
        _remove(temporary)
        raise


def _create_temporary(target: str, directory: str) -> tuple[int, str]:
    """An empty new file beside the target, as ``tempfile.mkstemp`` makes it, but named
    before it exists: an interrupt landing just after its creation (inside mkstemp, the
    name would be lost with it) removes it again."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    while True:
        temporary = os.path.join(directory, f".tracebridge-{os.urandom(6).hex()}.tmp")
        try:
            return os.open(temporary, flags, 0o600), temporary
        except FileExistsError:
            continue
        except OSError as error:
            raise OutputError(f"{target}: cannot write there ({error.strerror or error})") from None
        except BaseException:
            _remove(temporary)
            raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_output(path, compress=False) as out:
        out.write(data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
