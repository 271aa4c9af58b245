"""``python -m nagkit.devices.loopback --port PORT --sandbox DIR``: run the loopback adbd."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    from nagkit.devices.loopback import LoopbackAdbd, write_benchmark_runner

    ap = argparse.ArgumentParser(prog="python -m nagkit.devices.loopback",
                                 description="A loopback ADB device (minimal adbd) for tests; listens on 127.0.0.1.")
    ap.add_argument("--port", type=int, default=5555, help="TCP port (0 = any free port; default 5555)")
    ap.add_argument("--sandbox", required=True, help="folder that stands in for the device's file system")
    ap.add_argument("--no-auth", action="store_true", help="skip the AUTH exchange")
    ap.add_argument("--runner", help="also write the benchmark_model stand-in to this host path")
    ap.add_argument("--no-runner", action="store_true",
                    help="do not pre-place the benchmark_model stand-in at /data/local/tmp/nagkit/benchmark_model")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="the benchmark_model stand-in spends this times the seconds its flags ask for (default 1)")
    ap.add_argument("-v", "--verbose", action="count", default=0)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * args.verbose, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    adbd = LoopbackAdbd(args.sandbox, args.port, auth=not args.no_auth, install_runner=not args.no_runner,
                        time_scale=args.time_scale).start()
    if args.runner:
        write_benchmark_runner(args.runner)
    # the address on stdout (one line) so a parent process can read the port
    print(adbd.serial, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    adbd.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
