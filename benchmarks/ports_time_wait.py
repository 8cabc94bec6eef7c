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

    python3 benchmarks/ports_time_wait.py --ports 1000 --steady 200 6

The same at a steady rate (RATE connections a second for SECONDS, more than the range holds), once for each
`net.ipv4.tcp_tw_reuse` against a listener on a non-loopback address (192.0.2.2, on the namespace's `lo`, as
TransferQueue's sockets go to Ray's node address) -- the kernel's default 2 (reuse for loopback only) and 1 (reuse
a TIME_WAIT port for a new connection to the same peer once it is a second old) -- and once with the default
against 127.0.0.1; each in a namespace of its own. After the connections, the TIME_WAIT ports by parity (Linux's
`connect()` takes even ports first, `bind()` to port 0 odd ones first) and how many listeners `bind(("", 0))` can
still open. Output recorded in docs/bench/cpu-data/ports-tw-reuse.txt.
"""

from __future__ import annotations

import argparse
import errno
import math
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOW = 40000


def bind_port_zero() -> str:
    with socket.socket() as sock:
        try:
            sock.bind(("", 0))
        except OSError as exc:
            return f"OSError [Errno {exc.errno}] {exc.strerror} ({errno.errorcode[exc.errno]})"
        return f"port {sock.getsockname()[1]}"


def time_wait_ports() -> list[int]:
    """The local port of every TCP socket in TIME_WAIT (`ss`), one entry a socket."""
    out = subprocess.run(["ss", "-Htan", "state", "time-wait"], capture_output=True, text=True, check=True).stdout
    return [int(line.split()[2].rsplit(":", 1)[1]) for line in out.splitlines()]


def namespace_listener(ports: int, address: str, backlog: int) -> socket.socket:
    """Inside a namespace of its own: the ephemeral range narrowed to `ports` ports from LOW, `lo` up (with
    `address` on it), and a listener on `address`, port 5555."""
    RANGE.write_text(f"{LOW} {LOW + ports - 1}")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    if address != "127.0.0.1":
        subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((address, 5555))
    server.listen(backlog)
    return server


def range_size(text: str) -> int:
    """--ports: a whole number of ports the range between LOW and 65535 can hold, at least 2."""
    try:
        size = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a whole number of ports") from None
    if not 2 <= size <= 65536 - LOW:
        raise argparse.ArgumentTypeError(f"{text} ports: want 2 .. {65536 - LOW} (the range starts at {LOW})")
    return size


def connect_and_close(server: socket.socket, address: str) -> None:
    """One connection to `server` (listening on `address`, port 5555), closed by the client first: its ephemeral
    port goes to TIME_WAIT. Raises connect()'s OSError, the client socket closed."""
    with socket.socket() as client:
        client.connect((address, 5555))
        accepted, _ = server.accept()
        client.close()
        accepted.close()


# --steady: (tcp_tw_reuse, the listener's address) for each namespace, in order
STEADY_CASES = (("2", "192.0.2.2"), ("1", "192.0.2.2"), ("2", "127.0.0.1"))
REUSE = Path("/proc/sys/net/ipv4/tcp_tw_reuse")


def steady(ports: int, rate: float, seconds: float, reuse: str, address: str) -> str:
    """Inside a namespace of its own: `rate` connections a second for `seconds` to a listener on `address`, each
    closed by the client first; then the TIME_WAIT ports and how many `bind(("", 0))` listeners can open."""
    REUSE.write_text(reuse)
    made, refused = 0, Counter()
    with namespace_listener(ports, address, 4096) as server:
        start, total = time.monotonic(), int(rate * seconds)
        for i in range(total):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
            try:
                connect_and_close(server, address)
            except OSError as exc:
                refused[errno.errorcode[exc.errno]] += 1
                continue
            made += 1
        waiting = time_wait_ports()
        held = set(waiting)
        listeners = []
        try:
            while len(listeners) < ports:
                sock = socket.socket()
                listeners.append(sock)
                sock.bind(("", 0))
        except OSError:
            listeners.pop().close()
        opened = len(listeners)
        for sock in listeners:
            sock.close()
    failed = ", ".join(f"{n} {name}" for name, n in refused.items()) or "none"
    return (f"tcp_tw_reuse={reuse} to {address}: {made} of {total} connections made ({rate:g}/s for {seconds:g} s), "
            f"refused: {failed}; TIME_WAIT sockets {len(waiting)} on {len(held)} ports "
            f"({sum(1 for p in held if p % 2 == 0)} even, {sum(p % 2 for p in held)} odd); "
            f"bind(('', 0)) afterwards: {opened} listeners of {ports} ports")


def in_namespace(*argv: str) -> int:
    """Run this script again with argv in a network namespace of its own (`unshare -n`); its exit status."""
    return subprocess.run(["unshare", "-n", sys.executable, __file__, *argv]).returncode


def positive(text: str) -> float:
    """--steady's RATE and SECONDS: a positive, finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text}: want a positive, finite number")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ports", type=range_size, default=200, help="the ephemeral range's size in the namespace")
    parser.add_argument("--steady", nargs=2, type=positive, metavar=("RATE", "SECONDS"),
                        help="connections a second and for how long, once for each tcp_tw_reuse case")
    # the run inside a namespace of its own: --steady's one case, or the single run
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steady:
        if args.case is not None:
            print(steady(args.ports, *args.steady, *STEADY_CASES[args.case]), flush=True)
            return 0
        print(f"ephemeral range in each namespace: {LOW}-{LOW + args.ports - 1}", flush=True)
        for case in range(len(STEADY_CASES)):
            rc = in_namespace("--ports", str(args.ports), "--steady", f"{args.steady[0]:g}", f"{args.steady[1]:g}",
                              "--case", str(case))
            if rc:
                return rc
        return 0
    if not args.inside:
        return in_namespace("--ports", str(args.ports), "--inside")
    with namespace_listener(args.ports, "127.0.0.1", 1024) as server:
        print(f"ephemeral range in this namespace: {RANGE.read_text().split()}")
        print(f"bind(('', 0)) before: {bind_port_zero()}")
        made = 0
        for _ in range(args.ports):
            try:
                connect_and_close(server, "127.0.0.1")
            except OSError as exc:
                print(f"connect() refused after {made}: {exc}")
                break
            made += 1
        print(f"connections made and closed by the client: {made}; TIME_WAIT sockets: {len(time_wait_ports())}")
        print(f"bind(('', 0)) after: {bind_port_zero()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
