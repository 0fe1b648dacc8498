"""A TCP fault proxy (the harness's own: no netem or toxiproxy here) between
one `agentloop serve` instance and PostgreSQL. Modes, switched at any time:
  pass       forward both ways
  blackhole  accept and keep connections but forward nothing (a partition:
             the peer's packets are lost, nothing is refused)
  reset      reset every open connection and each new one at once
Standard library only."""

import select
import socket
import struct
import threading


class FaultProxy:

    def __init__(self, target_port, target_host="127.0.0.1"):
        self.target = (target_host, target_port)
        self.mode = "pass"
        self.lock = threading.Lock()
        self.conns = []  # [client, upstream]
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.stopping = False
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def set_mode(self, mode):
        with self.lock:
            self.mode = mode
            doomed = list(self.conns) if mode == "reset" else []
            if mode == "reset":
                self.conns = []
        for pair in doomed:
            for s in pair:
                self.abort(s)

    @staticmethod
    def abort(s):
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            s.close()
        except OSError:
            pass

    def stop(self):
        self.stopping = True
        self.set_mode("reset")
        try:
            self.listener.close()
        except OSError:
            pass

    def accept_loop(self):
        while not self.stopping:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.mode == "reset":
                self.abort(client)
                continue
            try:
                up = socket.create_connection(self.target, timeout=5)
                up.settimeout(None)
            except OSError:
                self.abort(client)
                continue
            pair = [client, up]
            with self.lock:
                self.conns.append(pair)
            threading.Thread(target=self.pump, args=(pair,), daemon=True).start()

    def pump(self, pair):
        client, up = pair
        peer = {client: up, up: client}
        try:
            while True:
                r, _, _ = select.select([client, up], [], [], 0.2)
                if self.mode == "blackhole":
                    # Read nothing: the kernel's buffers fill, the peer waits.
                    continue
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        raise OSError("closed")
                    peer[s].sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            with self.lock:
                if pair in self.conns:
                    self.conns.remove(pair)
            for s in pair:
                try:
                    s.close()
                except OSError:
                    pass
