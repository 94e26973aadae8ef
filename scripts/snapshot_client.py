"""What scripts/check-gzip.py and scripts/capture-responses.py both start
with: the command line `BASE_URL KEY SNAPSHOT`, the snapshot read (plain or
.json.gz) and one keep-alive connection to the server."""
import gzip
import http.client
import json
import urllib.parse


def open_from_argv(argv):
    """`(snapshot, connection, key)` from `argv[1:4]`."""
    base, key, snapshot_path = argv[1:4]
    opener = gzip.open if snapshot_path.endswith(".gz") else open
    with opener(snapshot_path, "rb") as f:
        snap = json.load(f)
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    return snap, conn, key
