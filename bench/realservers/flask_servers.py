"""Real rate-limiting servers from Python, for the bench module's
TestInteropWithRealServers (realservers_test.go): Flask-Limiter, as Debian
packages it (python3-flask-limiter: Flask-Limiter 3.3 over limits 2.8 and
Flask 2.2 on bookworm). The protocol is servers.js's: each argument is one
server to start on a free loopback port, as JSON,

    {"id": "c3", "server": "flask-limiter", "mode": "moving-window",
     "limit": 10, "windowMs": 1000}

and once every server listens the script prints "listening ID PORT" for
each, then "ready", and runs until its standard input closes.

Every server limits each client address to limit requests per windowMs
(whole seconds: limits counts its expiry in seconds) in its in-memory
storage, in front of a handler that answers 200 "ok". The modes are its
strategies and header settings:

  fixed-window             a window per client from its first request
                           (expiry = that time + the window); X-RateLimit-
                           Reset is the expiry's epoch second plus one,
                           Retry-After on a 429 the seconds to it,
                           truncated
  moving-window            a sliding log; its X-RateLimit-Reset is the
                           newest entry's epoch second, truncated, plus the
                           window, plus one: when the log will be empty,
                           not when one more entry fits
  moving-window-http-date  the same, Retry-After as an HTTP date
  elastic                  fixed-window-elastic-expiry: every request,
                           refused or not, pushes the window's end to a
                           window from it
  none                     fixed-window with headers disabled: a bare 429
"""

import json
import logging
import sys
import threading

from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from werkzeug.serving import make_server

MODES = {
    "fixed-window": dict(strategy="fixed-window", headers_enabled=True),
    "moving-window": dict(strategy="moving-window", headers_enabled=True),
    "moving-window-http-date": dict(strategy="moving-window", headers_enabled=True, retry_after="http-date"),
    "elastic": dict(strategy="fixed-window-elastic-expiry", headers_enabled=True),
    "none": dict(strategy="fixed-window", headers_enabled=False),
}


def start(spec):
    mode = MODES.get(spec["mode"])
    if mode is None:
        raise ValueError("flask-limiter: no mode %r" % spec["mode"])
    if spec["windowMs"] % 1000:
        raise ValueError("flask-limiter: windows are whole seconds, not %d ms" % spec["windowMs"])
    app = Flask(spec["id"])
    Limiter(
        get_remote_address,
        app=app,
        default_limits=["%d per %d second" % (spec["limit"], spec["windowMs"] // 1000)],
        storage_uri="memory://",
        **mode,
    )

    @app.get("/")
    def ok():
        return "ok", 200, {"Content-Type": "text/plain"}

    srv = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_port


def main():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    ports = [(s["id"], start(s)) for s in map(json.loads, sys.argv[1:])]
    for sid, port in ports:
        print("listening %s %d" % (sid, port), flush=True)
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes it, or dies


if __name__ == "__main__":
    main()
