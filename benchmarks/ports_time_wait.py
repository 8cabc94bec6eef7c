"""Why a bind to port 0 can fail with `[Errno 98] Address already in use` (the PPO control's start in
docs/bench/gpu-canary.md, "The PPO canary's seed 1"): TCP connections that the client closes first leave their
ephemeral port in TIME_WAIT for a minute, and once such sockets cover the ephemeral range, `bind(("", 0))` --
what TransferQueue's `get_free_port` and verl's `Worker._get_free_port` do -- finds no port and fails.
TransferQueue (0.1.10, the Hopper stack's) opens a new TCP socket for every request to its controller and
storage units and closes it afterwards (`with_zmq_socket` in transfer_queue/utils/zmq_utils.py: "only the
DEALER socket is per-call").

Run as root on Linux; it runs itself again in a network namespace of its own (`unshare -n`), whose ephemeral
range it narrows to --ports ports, so the host's range and sockets are not touched:

    python3 benchmarks/ports_time_wait.py --ports 200

It binds port 0 once, makes and closes --ports connections to a local listener (the client closing first),
counts the TIME_WAIT sockets (`ss`) and binds port 0 again. Output recorded in
docs/bench/cpu-data/ports-time-wait.txt.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOW = 40000
INSIDE = "RLRECIPES_PORTS_NAMESPACE"  # set once the script runs in its own network namespace


def bind_port_zero() -> str:
    with socket.socket() as sock:
        try:
            sock.bind(("", 0))
        except OSError as exc:
            return f"OSError [Errno {exc.errno}] {exc.strerror} ({errno.errorcode[exc.errno]})"
        return f"port {sock.getsockname()[1]}"


def time_wait_sockets() -> int:
    out = subprocess.run(["ss", "-Htan", "state", "time-wait"], capture_output=True, text=True, check=True).stdout
    return len(out.splitlines())


def range_size(text: str) -> int:
    """--ports: a whole number of ports the range between LOW and 65535 can hold, at least 2."""
    try:
        size = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a whole number of ports") from None
    if not 2 <= size <= 65536 - LOW:
        raise argparse.ArgumentTypeError(f"{text} ports: want 2 .. {65536 - LOW} (the range starts at {LOW})")
    return size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ports", type=range_size, default=200, help="the ephemeral range's size in the namespace")
    args = parser.parse_args(argv)
    if os.environ.get(INSIDE) != "1":
        os.environ[INSIDE] = "1"
        os.execvp("unshare", ["unshare", "-n", sys.executable, __file__, "--ports", str(args.ports)])
    RANGE.write_text(f"{LOW} {LOW + args.ports - 1}")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    print(f"ephemeral range in this namespace: {RANGE.read_text().split()}")
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 5555))
        server.listen(1024)
        print(f"bind(('', 0)) before: {bind_port_zero()}")
        made = 0
        for _ in range(args.ports):
            client = socket.socket()
            try:
                client.connect(("127.0.0.1", 5555))
            except OSError as exc:
                print(f"connect() refused after {made}: {exc}")
                client.close()
                break
            accepted, _ = server.accept()
            client.close()  # the client closes first: its ephemeral port goes to TIME_WAIT
            accepted.close()
            made += 1
        print(f"connections made and closed by the client: {made}; TIME_WAIT sockets: {time_wait_sockets()}")
        print(f"bind(('', 0)) after: {bind_port_zero()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
