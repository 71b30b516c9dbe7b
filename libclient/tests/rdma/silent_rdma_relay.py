#!/usr/bin/env python3
"""A server whose RDMA never answers, for libpq_rdma.so's fallback tests.

silent_rdma_relay.py LISTEN_IP LISTEN_PORT SERVER_PORT RDMA_PORT BUDGET_MS [--no-reply]

Listens on LISTEN_IP:LISTEN_PORT. A connection whose first 8 bytes are the
RDMA upgrade request (protocol/upgrade.hpp) gets an 'R' accept naming
LISTEN_IP:RDMA_PORT (an rdma_cm listener that never accepts: the client's
connection request gets no answer, as when a firewall drops RoCE) and the
setup budget BUDGET_MS; everything after that, and every connection that
does not ask, is relayed to a real PostgreSQL on LISTEN_IP:SERVER_PORT, so
a client that falls back continues its session on TCP. With --no-reply the
request is never answered (a server that hangs before replying).
"""
import os
import select
import socket
import struct
import sys
import threading

REQUEST = struct.pack("!II", 8, 0x52444D41)
ACCEPT_SIZE = 56
BUDGET_UNIT_MS = 100


def accept_reply(ip, port, budget_ms):
    reply = bytearray(ACCEPT_SIZE)
    reply[0] = ord("R")
    reply[1] = 1  # handshake version
    reply[2] = 4  # IPv4
    struct.pack_into("!H", reply, 4, port)
    struct.pack_into("!H", reply, 6, min(max(budget_ms // BUDGET_UNIT_MS, 1), 0xFFFF))
    reply[8:12] = socket.inet_aton(ip)
    reply[24:56] = os.urandom(32)
    return bytes(reply)


def relay(a, b):
    socks = [a, b]
    try:
        while True:
            ready, _, _ = select.select(socks, [], [])
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return
    finally:
        a.close()
        b.close()


def serve(client, ip, server_port, rdma_port, budget_ms, no_reply):
    first = b""
    while len(first) < len(REQUEST):
        chunk = client.recv(len(REQUEST) - len(first))
        if not chunk:
            client.close()
            return
        first += chunk
        if not REQUEST.startswith(first):
            break
    if first == REQUEST:
        if no_reply:
            while client.recv(65536):
                pass
            client.close()
            return
        client.sendall(accept_reply(ip, rdma_port, budget_ms))
        first = b""
    server = socket.create_connection((ip, server_port))
    if first:
        server.sendall(first)
    relay(client, server)


def main():
    ip, port, server_port, rdma_port, budget_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), int(sys.argv[5])
    no_reply = "--no-reply" in sys.argv[6:]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((ip, port))
    listener.listen(64)
    print("listening", flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, ip, server_port, rdma_port, budget_ms, no_reply),
                         daemon=True).start()


if __name__ == "__main__":
    main()
