"""An HTTP server for coldtrace attach tests.

On its first request it reads DATA (cold in the test) and compiles one
Numba cache=True function; later requests do neither. GET /burst spins
the CPU for 300 ms; GET /cc compiles a tiny C file with cc. Prints "ready PORT" once listening.
"""
import http.server
import os
import subprocess
import sys
import tempfile
import time

import numba

DATA = sys.argv[1]
first = True


@numba.njit(cache=True)
def checksum(n):
    s = 0
    for i in range(n):
        s = (s * 31 + i) % 1000003
    return s


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global first
        if self.path == "/burst":
            end = time.time() + 0.3
            while time.time() < end:
                pass
        elif self.path == "/cc":
            with tempfile.TemporaryDirectory() as d:
                subprocess.run(["cc", "-c", "-x", "c", "-o", os.path.join(d, "k.o"), "-"],
                               input=b"int k(int x) { return x * 3 + 1; }\n", check=True)
        elif self.path == "/fork":
            child = os.fork()
            if child == 0:
                end = time.time() + 0.3
                while time.time() < end:
                    pass
                os._exit(0)
            os.waitpid(child, 0)
        elif first:
            first = False
            with open(DATA, "rb") as f:
                while f.read(1 << 20):
                    pass
            checksum(1000)
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print("ready", srv.server_address[1], flush=True)
srv.serve_forever()
