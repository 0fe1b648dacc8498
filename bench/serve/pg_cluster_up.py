#!/usr/bin/env python3
"""Starts a throwaway PostgreSQL cluster with durability on (fsync,
synchronous_commit: tests/e2e/pg_cluster.py) for serve_scale.sh, prints

  URL <admin url>
  PID <postmaster pid>
  PSQL <psql program>

on stdout, then keeps the cluster until its standard input closes or it is
sent SIGTERM, and stops and deletes it. Listens on 127.0.0.1 and a Unix socket
in the cluster's directory only. With --stat-statements the cluster loads
pg_stat_statements (the statements' counts and times, for a profile).
"""
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "e2e"))
from pg_cluster import PgCluster  # noqa: E402


def main():
    cluster = PgCluster(durable=True).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        if "--stat-statements" in sys.argv[1:]:
            cluster.psql("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
            cluster.restart()
            cluster.psql("CREATE EXTENSION pg_stat_statements")
        with open(os.path.join(cluster.dir, "data", "postmaster.pid")) as f:
            pid = int(f.readline())
        print("URL", cluster.admin_url())
        print("PID", pid)
        print("PSQL", os.path.join(cluster.bindir, "psql"), flush=True)
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
        done.wait()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
