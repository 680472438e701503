#!/usr/bin/env python3
"""A local HTTP server for the download tests (tests/data/test_download.cpp).

Serves the files of a folder on 127.0.0.1 at a free port, which it prints as the first line of
stdout. Supports `Range: bytes=N-` and `bytes=N-M` (206 Partial Content), which
SimpleHTTPRequestHandler lacks. Each file named by --cut is cut once: its first request without a
Range gets the whole Content-Length in its headers but only the first half of the body, then the
connection is closed, as a dropped connection would. With --no-range, Range headers are ignored
(200 and the whole file), as some servers do. Every request is appended to --log as
"PATH RANGE" (RANGE is "-" without one).

  python3 http_server.py --dir FOLDER [--cut NAME ...] [--log FILE] [--no-range]
"""
import argparse
import http.server
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cut", action="append", default=[])
    ap.add_argument("--log", default=os.devnull)
    ap.add_argument("--no-range", action="store_true", help="ignore Range headers, as some servers do")
    args = ap.parse_args()
    to_cut = set(args.cut)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet: the test reads --log
            pass

        def do_GET(self):
            name = self.path.lstrip("/")
            rng = self.headers.get("Range")
            with open(args.log, "a") as log:
                log.write(f"{self.path} {rng or '-'}\n")
            path = os.path.join(args.dir, name)
            if "/" in name or not os.path.isfile(path):
                self.send_error(404)
                return
            with open(path, "rb") as f:
                data = f.read()
            start, end, status = 0, len(data), 200
            if rng and not args.no_range:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
                if not m or int(m.group(1)) >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = int(m.group(1))
                end = int(m.group(2)) + 1 if m.group(2) else len(data)
                status = 206
            self.send_response(status)
            self.send_header("Content-Length", str(end - start))
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
            self.end_headers()
            body = data[start:end]
            if name in to_cut and status == 200:
                to_cut.discard(name)
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # a client that gave up mid-transfer (the tests' full disk) is expected

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
