"""``tracebridge view``: open a trace in a viewer.

The HTML view is a file the browser opens directly. The Perfetto UI
(https://ui.perfetto.dev) is a web page that fetches the trace itself: as Perfetto's own
``open_trace_in_ui`` script does, the ``.pftrace`` is served once on 127.0.0.1 port 9001
(the one origin the UI's content security policy lets it fetch from), with a CORS header
for the UI's origin, and the browser is pointed at ``https://ui.perfetto.dev/#!/?url=...``.
The server stops after the file was fetched. Where no browser can be started, the URL is
printed for the user to open.
"""

from __future__ import annotations

import http.server
import os
import sys
import threading
import urllib.parse
import webbrowser
from collections.abc import Callable

from .errors import OutputError

PERFETTO_UI = "https://ui.perfetto.dev"
PERFETTO_PORT = 9001


def perfetto_url(trace_url: str, ui: str = PERFETTO_UI) -> str:
    return f"{ui}/#!/?url={urllib.parse.quote(trace_url, safe=':/')}"


class _OneFile(http.server.HTTPServer):
    """Serves ``path`` at ``/<its name>`` until one GET has received the whole file."""

    def __init__(self, path: str, port: int, origin: str):
        self.path, self.origin = path, origin
        self.route = "/" + urllib.parse.quote(os.path.basename(path))
        self.fetched = threading.Event()
        try:
            super().__init__(("127.0.0.1", port), _OneFileHandler)
        except OSError as error:
            raise OutputError(f"cannot serve on 127.0.0.1:{port} ({error.strerror or error}); "
                              f"is another trace being served? (--port chooses another)") from None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{self.route}"


class _OneFileHandler(http.server.BaseHTTPRequestHandler):
    server: _OneFile

    def log_message(self, *args):  # the CLI says what happens; no access log
        pass

    def _headers(self, status: int, length: int | None = None, **extra: str) -> None:
        self.send_response(status)
        self.send_header("Access-Control-Allow-Origin", self.server.origin)
        for name, value in extra.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Cache-Control", "no-cache")
        if length is not None:
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def do_OPTIONS(self):  # a CORS preflight, should the UI send one
        self._headers(200, 0, Access_Control_Allow_Methods="GET")

    def do_GET(self):
        if urllib.parse.urlsplit(self.path).path != self.server.route:
            self._headers(404, 0)
            return
        size = os.path.getsize(self.server.path)
        self._headers(200, size)
        with open(self.server.path, "rb") as source:
            while chunk := source.read(1 << 20):
                self.wfile.write(chunk)
        self.wfile.flush()
        self.server.fetched.set()


def serve_for_perfetto(path: str | os.PathLike, *, port: int = PERFETTO_PORT, ui: str = PERFETTO_UI,
                       open_browser: Callable[[str], bool] = webbrowser.open, out=None,
                       timeout_s: float | None = None) -> bool:
    """Serve ``path`` for the Perfetto UI and open the UI on it; returns once the file was
    fetched (True) or after ``timeout_s`` (False). ``out``: where to say what happens
    (default stderr)."""
    out = out or sys.stderr
    server = _OneFile(os.fspath(path), port, ui)
    url = perfetto_url(server.url, ui)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        opened = False
        try:
            opened = bool(open_browser(url))
        except Exception:  # noqa: BLE001 - any failure to start a browser: print the URL instead
            opened = False
        if opened:
            print(f"opened {url}", file=out)
        else:
            print(f"no browser could be started; open this URL:\n{url}", file=out)
        print(f"serving {os.fspath(path)} on {server.url} until the UI has fetched it (Ctrl-C stops)", file=out,
              flush=True)
        return server.fetched.wait(timeout_s)
    finally:
        server.shutdown()
        server.server_close()


def open_html(path: str | os.PathLike, *, open_browser: Callable[[str], bool] = webbrowser.open, out=None) -> bool:
    """Open the HTML view ``path`` in a browser, or print where it is."""
    out = out or sys.stdout
    url = "file://" + urllib.parse.quote(os.path.abspath(os.fspath(path)))
    try:
        opened = bool(open_browser(url))
    except Exception:  # noqa: BLE001
        opened = False
    print(f"opened {url}" if opened else f"no browser could be started; open {url}", file=out)
    return opened
