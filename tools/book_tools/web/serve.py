"""A folder served on a localhost port, as the site is served: for the PDF's printer, the browser tests and page_speed.

The built book's pages load their models and ONNX Runtime's WebAssembly over HTTP, which a page
opened from disk (``file://``) cannot do; Python's own server, in a thread, is enough for one browser.
As GitHub Pages does, it compresses text and WebAssembly with gzip for a browser that accepts it
(``COMPRESSED``), and sends everything else (the ``.onnx`` models, images, fonts) as it is. With a
``log`` (a list), each response appends a :class:`Sent`: what a page's visit cost, byte for byte.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# The types GitHub Pages compresses that a book's site serves: text, scripts, data, SVG and WebAssembly.
COMPRESSED = ("text/", "application/javascript", "application/json", "image/svg+xml", "application/wasm")


@dataclass(frozen=True)
class Sent:
    """One response: the path asked for, its status, and the bytes of its body as sent (compressed or not)."""

    path: str
    status: int
    body_bytes: int
    gzip: bool


def _compressible(content_type: str) -> bool:
    return content_type.startswith(COMPRESSED)


@functools.lru_cache(maxsize=256)
def _gzipped(path: str, mtime_ns: int, size: int) -> bytes:
    """A file's gzip (level 9, no timestamp: the same bytes every time), computed once per version of it."""
    return gzip.compress(Path(path).read_bytes(), compresslevel=9, mtime=0)


@contextmanager
def serve(folder: Path, log: list[Sent] | None = None) -> Iterator[str]:
    """Serve ``folder`` on an ephemeral localhost port; yields the base URL (ends with /)."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def send_head(self):
            path = Path(self.translate_path(self.path))
            content_type = self.guess_type(str(path)) if path.is_file() else ""
            accepts = "gzip" in self.headers.get("Accept-Encoding", "")
            if not (path.is_file() and accepts and _compressible(content_type)):
                return self._plain_head()
            stat = path.stat()
            body = _gzipped(str(path), stat.st_mtime_ns, stat.st_size)
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Last-Modified", self.date_time_string(stat.st_mtime))
            self.send_header("Cache-Control", "max-age=600")  # GitHub Pages' lifetime
            self.end_headers()
            self._record(200, len(body), True)
            return _Body(body)

        def _plain_head(self):
            result = super().send_head()
            if result is not None and hasattr(result, "fileno"):
                self._record(200, os.fstat(result.fileno()).st_size, False)
            return result

        def send_error(self, code, message=None, explain=None):
            self._record(code, 0, False)
            super().send_error(code, message, explain)

        def end_headers(self):
            if not any(line.startswith(b"Cache-Control") for line in getattr(self, "_headers_buffer", [])):
                self.send_header("Cache-Control", "max-age=600")
            super().end_headers()

        def _record(self, status: int, size: int, compressed: bool) -> None:
            if log is not None and self.command == "GET":
                log.append(Sent(self.path.split("?")[0], status, size, compressed))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _Body:
    """What ``copyfile`` reads a compressed body from, then closes."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int = -1) -> bytes:
        data, self.data = (self.data, b"") if size < 0 else (self.data[:size], self.data[size:])
        return data

    def close(self) -> None:
        pass
