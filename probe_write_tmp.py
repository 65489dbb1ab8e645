import time, sys, tempfile, subprocess
from wander.service.archive import Archive
from wander.service.archiver import _parse
import psycopg

data = open("/tmp/records.jsonl","rb").read().splitlines()
data = (data * 5)  # 10,000 records, ids repeat: upsert
def bench(url, chunk):
    a = Archive(url)
    t = time.perf_counter(); tp = 0
    for i in range(0, len(data), chunk):
        t0 = time.perf_counter()
        recs = _parse(data[i:i+chunk])
        tp += time.perf_counter() - t0
        a.write(recs)
    el = time.perf_counter() - t
    a.dispose()
    return len(data)/el, tp/el

d = tempfile.mkdtemp()
url = f"sqlite:///{d}/a.db"
subprocess.run([".venv/bin/wander", "db", "upgrade"], env={"WANDER_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}, check=True, capture_output=True)
for chunk in (20, 200):
    print("sqlite", chunk, bench(url, chunk))
with psycopg.connect("postgresql://127.0.0.1/test", autocommit=True) as c:
    c.execute("DROP DATABASE IF EXISTS probe_tmp"); c.execute("CREATE DATABASE probe_tmp")
pg = "postgresql+psycopg://127.0.0.1/probe_tmp"
subprocess.run([".venv/bin/wander", "db", "upgrade"], env={"WANDER_DATABASE_URL": pg, "PATH": "/usr/bin:/bin"}, check=True, capture_output=True)
for chunk in (20, 200):
    print("pg", chunk, bench(pg, chunk))
with psycopg.connect("postgresql://127.0.0.1/test", autocommit=True) as c:
    c.execute("DROP DATABASE IF EXISTS probe_tmp")
