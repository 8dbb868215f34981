#!/usr/bin/env python3
"""A small look-alike of the Hugging Face Hub on loopback, for testing downloads without a network.

It serves one model repository from a local folder with the requests and headers
huggingface_hub (and Tlaloc) use:
  GET  /api/models/ORG/NAME/revision/REV   JSON {"id", "sha", "siblings": [{"rfilename"}]}
  GET  /api/models/ORG/NAME/tree/REV       JSON [{"type", "path", "oid", "size", "lfs"}] (what
                                           huggingface_hub's snapshot_download lists)
  HEAD/GET /ORG/NAME/resolve/REV/FILE      a git file: 200 with ETag "<git blob sha1>",
                                           X-Repo-Commit; an LFS file (*.safetensors, or 10 MiB
                                           and more): 302 to the "CDN" with X-Linked-Etag
                                           "<sha256>", X-Linked-Size, X-Repo-Commit
  HEAD/GET /cdn/SHA256                     the bytes, with Range (206, Content-Range)
The CDN is addressed as http://localhost:PORT while the Hub is http://127.0.0.1:PORT, so that,
as with the real Hub, a redirect goes to another host (huggingface_hub stops there for the
metadata; libcurl does not forward the token there).
Errors carry X-Error-Code as the Hub's do (RepoNotFound, RevisionNotFound, EntryNotFound).

Options to test failures: --drop-after N closes the connection after N bytes of the first GET
of each CDN file (a resume must follow); --corrupt FILE serves FILE's bytes with one byte
changed under its true sha256; --token T answers API and resolve requests without
"Authorization: Bearer T" with 401 (no token) or 403 (another token: a gated model).

Every request is logged as one JSON line (method, path, host, range, authorization, status,
bytes of body sent) to --log.

Usage: hub_server.py --model-dir DIR --repo ORG/NAME --port-file FILE --log FILE
                     [--branch main ...] [--drop-after N] [--corrupt FILE] [--token T]
"""

import argparse
import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

LFS_THRESHOLD = 10 * 1024 * 1024


class Repo:
    """The files of one repository, their git and LFS identities, and its commit."""

    def __init__(self, folder, name, branches):
        self.name = name
        self.branches = set(branches)
        self.files = {}
        for fname in sorted(os.listdir(folder)):
            path = os.path.join(folder, fname)
            if not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            lfs = fname.endswith(".safetensors") or len(data) >= LFS_THRESHOLD
            git_sha1 = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            self.files[fname] = {
                "data": data,
                "lfs": lfs,
                "sha256": hashlib.sha256(data).hexdigest(),
                "git_sha1": git_sha1,
            }
        listing = "".join(f"{n}:{f['git_sha1']}\n" for n, f in self.files.items())
        self.commit = hashlib.sha1(listing.encode()).hexdigest()
        self.by_sha256 = {f["sha256"]: n for n, f in self.files.items() if f["lfs"]}

    def knows_revision(self, rev):
        return rev in self.branches or rev == self.commit


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hub-lookalike/1"

    def log_message(self, fmt, *args):  # the JSON log replaces the default stderr lines
        pass

    def _log(self, status, sent):
        entry = {
            "method": self.command,
            "path": self.path,
            "host": self.headers.get("Host", ""),
            "range": self.headers.get("Range"),
            "authorization": self.headers.get("Authorization"),
            "status": status,
            "sent": sent,
        }
        with self.server.log_lock:
            with open(self.server.opts.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def _reply(self, status, headers=None, body=b""):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        sent = 0
        if self.command != "HEAD":
            self.wfile.write(body)
            sent = len(body)
        self._log(status, sent)

    def _error(self, status, code, message):
        self._reply(status, {"X-Error-Code": code, "X-Error-Message": message,
                             "Content-Type": "application/json"},
                    json.dumps({"error": message}).encode())

    def _authorized(self):
        token = self.server.opts.token
        if token is None or self.headers.get("Authorization") == f"Bearer {token}":
            return True
        if self.headers.get("Authorization"):  # a token without access, as for a gated model
            self._error(403, "GatedRepo", "Access to model org/tiny is restricted")
        else:
            self._error(401, "RepoNotFound", "Invalid credentials in Authorization header")
        return False

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        repo = self.server.repo
        path = unquote(urlsplit(self.path).path)
        api = f"/api/models/{repo.name}/revision/"
        tree = f"/api/models/{repo.name}/tree/"
        resolve = f"/{repo.name}/resolve/"
        if path.startswith("/api/models/"):
            if not self._authorized():
                return
            if path.startswith(tree):
                rev = path[len(tree):].split("/")[0]
                if not repo.knows_revision(rev):
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
                entries = []
                for n, f in repo.files.items():
                    entry = {"type": "file", "path": n, "oid": f["git_sha1"], "size": len(f["data"])}
                    if f["lfs"]:
                        entry["lfs"] = {"oid": f["sha256"], "size": len(f["data"]), "pointerSize": 134}
                    entries.append(entry)
                return self._reply(200, {"Content-Type": "application/json"},
                                   json.dumps(entries).encode())
            if not path.startswith(api):
                return self._error(404, "RepoNotFound", "Repository not found")
            rev = path[len(api):]
            if not repo.knows_revision(rev):
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            info = {"id": repo.name, "modelId": repo.name, "sha": repo.commit, "private": False,
                    "siblings": [{"rfilename": n} for n in repo.files]}
            return self._reply(200, {"Content-Type": "application/json"},
                               json.dumps(info).encode())
        if path.startswith("/cdn/"):
            return self._cdn(path[len("/cdn/"):])
        if "/resolve/" in path:
            if not self._authorized():
                return
            if not path.startswith(resolve):
                return self._error(404, "RepoNotFound", "Repository not found")
            rev, _, fname = path[len(resolve):].partition("/")
            if not repo.knows_revision(rev):
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            f = repo.files.get(fname)
            if f is None:
                return self._error(404, "EntryNotFound", f"{fname} does not exist")
            common = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
            if f["lfs"]:
                port = self.server.server_address[1]
                return self._reply(302, {**common,
                                         "ETag": f'"{f["git_sha1"]}"',
                                         "X-Linked-Etag": f'"{f["sha256"]}"',
                                         "X-Linked-Size": str(len(f["data"])),
                                         "Location": f"http://localhost:{port}/cdn/{f['sha256']}"
                                                     "?signature=lookalike"})
            return self._reply(200, {**common, "ETag": f'"{f["git_sha1"]}"'}, f["data"])
        self._error(404, "RepoNotFound", f"no route for {path}")

    def _cdn(self, sha):
        repo = self.server.repo
        fname = repo.by_sha256.get(sha)
        if fname is None:
            return self._reply(404, {}, b"no such object")
        data = repo.files[fname]["data"]
        if fname == self.server.opts.corrupt:
            data = bytearray(data)
            data[len(data) // 2] ^= 0xFF
            data = bytes(data)
        start = 0
        status = 200
        headers = {"ETag": f'"{sha}"', "Accept-Ranges": "bytes"}
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                return self._reply(416, {"Content-Range": f"bytes */{len(data)}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        drop = self.server.opts.drop_after
        with self.server.log_lock:
            first = self.command == "GET" and sha not in self.server.dropped
            if first and drop is not None:
                self.server.dropped.add(sha)
        if first and drop is not None and drop < len(body):
            # Promise the whole body, send part of it, hang up: the client sees a short read.
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:drop])
            self.wfile.flush()
            self._log(status, drop)
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self._reply(status, headers, body)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--repo", required=True, help="ORG/NAME")
    parser.add_argument("--branch", action="append", default=None, help="branch names (main)")
    parser.add_argument("--port-file", required=True, help="where the chosen port is written")
    parser.add_argument("--log", required=True, help="JSON lines, one per request")
    parser.add_argument("--drop-after", type=int, default=None)
    parser.add_argument("--corrupt", default=None, help="a file name to serve corrupted")
    parser.add_argument("--token", default=None, help="require Authorization: Bearer TOKEN")
    opts = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.opts = opts
    server.repo = Repo(opts.model_dir, opts.repo, opts.branch or ["main"])
    server.log_lock = threading.Lock()
    server.dropped = set()
    tmp = opts.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, opts.port_file)
    print(f"hub look-alike on 127.0.0.1:{server.server_address[1]} serving {opts.repo} "
          f"commit {server.repo.commit}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
