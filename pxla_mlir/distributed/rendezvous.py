"""Joining a multi-process run before jax does.

``jax.distributed.initialize`` ends every process with SIGABRT when the run
cannot start (after ``initialization_timeout``): a process that never
starts, an unreachable coordinator, a process id out of range, the
coordinator's port in use. Here every process first checks in with process
0 over the coordinator's port, so that each of these is a Python error, on
every process that came, naming the cause:

* process 0 listens on the coordinator's port (failing at once if it is in
  use) until processes ``1..n-1`` have checked in, then answers each
  ``{"go": true}``, or ``{"error": ...}`` to each and raises;
* process k connects (retrying until the timeout) and sends
  ``{"process_id": k, "num_processes": n, "host": ..., "pid": ...}``, one
  JSON line; a process whose own arguments are wrong sends ``{"error": ...}``
  instead (:func:`report`), so that process 0 fails at once, not at the
  timeout.

Process 0 then closes its listener (jax's coordination service binds the
port next); the connections stay open as the run's link (:mod:`.link`).
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import time

__all__ = ["JoinError", "split_address", "join", "report", "send", "LineReader"]

_MAX_LINE = 64 * 1024
_GRPC_PREFACE = b"PRI * HTTP/2.0"
_REPLY_MARGIN_S = 5.0


class JoinError(RuntimeError):
    """A multi-process run that cannot start."""


def split_address(address, what: str = "coordinator_address") -> tuple[str, int]:
    """``host:port`` (``[v6 address]:port``) as (host, port), or a ValueError saying what is wrong."""
    if not isinstance(address, str):
        raise TypeError(f"{what} must be a 'host:port' string (e.g. '10.0.0.1:1234'), got {address!r}")
    text = address.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.rpartition(":")
    if not host or not port:
        raise ValueError(f"{what}={address!r} is not 'host:port': write the host of process 0 and a port it may "
                         f"listen on, e.g. '10.0.0.1:1234' (127.0.0.1 for processes of one machine)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what}={address!r}: port {port!r} is not a number between 1 and 65535")
    return host, int(port)


def send(sock: socket.socket, message: dict) -> None:
    sock.sendall((json.dumps(message) + "\n").encode())


class LineReader:
    """JSON lines from a socket (blocking or not)."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer, self.closed = sock, b"", False

    def feed(self) -> list:
        """Reads what is there; the complete messages (a non-object line is returned as bytes)."""
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return []
        except TimeoutError:
            raise
        except OSError:  # reset: as closed
            data = b""
        if not data:
            self.closed = True
            return []
        self.buffer += data
        out = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            out.append(message if isinstance(message, dict) else line)
        if len(self.buffer) > _MAX_LINE:
            out.append(self.buffer[:100])
            self.buffer = b""
        return out


def _hello(process_id, num_processes, **extra) -> dict:
    return {"process_id": process_id, "num_processes": num_processes, "host": socket.gethostname(),
            "pid": os.getpid(), **extra}


def _who(hello: dict) -> str:
    return f"pid {hello.get('pid')} on {hello.get('host')}"


def join(address: str, num_processes: int, process_id: int, *, timeout_s: float,
         bind_address: str | None = None) -> dict[int, socket.socket]:
    """Waits until every process of the run has checked in; the open
    connections: on process 0 one per other process, elsewhere ``{0: ...}``."""
    deadline = time.monotonic() + timeout_s
    if process_id == 0:
        return _serve(address, bind_address, num_processes, timeout_s, deadline)
    return {0: _check_in(address, num_processes, process_id, timeout_s, deadline)}


def report(address: str, num_processes, process_id, message: str, *, within_s: float = 10.0) -> None:
    """Best effort: tells process 0 that this process cannot join (why), so
    that the run fails at once; retries while process 0 may still be starting."""
    deadline = time.monotonic() + within_s
    try:
        host, port = split_address(address)
    except (ValueError, TypeError):
        return
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2.0) as sock:
                send(sock, _hello(process_id, num_processes, error=message))
            return
        except OSError:
            time.sleep(0.2)


# -- process 0 ----------------------------------------------------------------------------------

def _listen(address: str, bind_address: str | None) -> socket.socket:
    host, port = split_address(address)
    if bind_address:
        host, port = split_address(bind_address, "coordinator_bind_address")
    else:
        host = "::"  # all addresses on the coordinator's port, as jax's service binds it
    try:
        if host in ("::", "") and socket.has_dualstack_ipv6():
            return socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.create_server(("" if host == "::" else host, port), family=family)
    except OSError as e:
        raise JoinError(
            f"process 0 cannot listen on port {port} for the run's coordinator ({address}): "
            f"{os.strerror(e.errno) if e.errno else e}. "
            + ("Another program (or a run still ending) uses the port: pick a free one for every process "
               "(pxla_mlir.distributed.launch and pxla-mlir run --processes pick one themselves)"
               if e.errno in (98, 48, 10048) else "Check coordinator_address (and coordinator_bind_address)")
        ) from None


def _serve(address, bind_address, n: int, timeout_s: float, deadline: float) -> dict[int, socket.socket]:
    listener = _listen(address, bind_address)
    listener.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    readers: dict[socket.socket, LineReader] = {}
    joined: dict[int, tuple[socket.socket, dict]] = {}
    try:
        while len(joined) < n - 1:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = [k for k in range(1, n) if k not in joined]
                came = ", ".join(["0"] + [str(k) for k in sorted(joined)])
                raise _Refusal(
                    f"process 0 waited {timeout_s:g} s at {address} for the {n} processes of the run to join: "
                    f"{_processes(missing)} did not (joined: {came}). Start every process with the same "
                    f"coordinator address, num_processes={n} and its own process_id in 0..{n - 1}; a process that "
                    f"starts later needs a longer initialization_timeout (PXLA_MP_INIT_TIMEOUT)")
            for key, _ in selector.select(min(remaining, 0.5)):
                if key.fileobj is listener:
                    try:
                        conn, _ = listener.accept()
                    except BlockingIOError:
                        continue
                    conn.setblocking(False)
                    readers[conn] = LineReader(conn)
                    selector.register(conn, selectors.EVENT_READ)
                    continue
                conn = key.fileobj
                assert isinstance(conn, socket.socket)  # the selector holds sockets only
                reader = readers[conn]
                messages = reader.feed()
                if reader.buffer.startswith(_GRPC_PREFACE) or any(isinstance(m, bytes) for m in messages):
                    raise _Refusal(
                        f"a process connected to the coordinator at {address} without checking in: it called "
                        f"jax.distributed.initialize itself (or another program uses the port). Every process of "
                        f"the run must call pxla_mlir.distributed.initialize")
                for hello in messages:
                    _admit(hello, conn, n, joined)
                if reader.closed:
                    selector.unregister(conn)
                    readers.pop(conn).sock.close()
                    for k, (sock, _hello) in list(joined.items()):
                        if sock is conn:
                            del joined[k]  # it gave up (or died): it must come again
    except _Refusal as refusal:
        for conn in readers:
            try:
                conn.setblocking(True)
                send(conn, {"error": str(refusal)})
            except OSError:
                pass
            conn.close()
        raise JoinError(str(refusal)) from None
    finally:
        selector.close()
        listener.close()  # the port is jax's coordination service's from now on
    for conn, _ in joined.values():
        conn.setblocking(True)
        send(conn, {"go": True})
    return {k: conn for k, (conn, _) in joined.items()}


class _Refusal(Exception):
    pass


def _admit(hello: dict, conn, n: int, joined: dict) -> None:
    k, theirs = hello.get("process_id"), hello.get("num_processes")
    if "error" in hello:
        raise _Refusal(f"process {k} ({_who(hello)}) cannot join the run: {hello['error']}")
    if theirs != n:
        raise _Refusal(f"process {k} ({_who(hello)}) was started with num_processes={theirs}, process 0 with "
                       f"num_processes={n}: every process of a run needs the same num_processes")
    if not isinstance(k, int) or not 0 < k < n:
        raise _Refusal(f"a process ({_who(hello)}) has process_id={k!r}, but the run's process ids are 0..{n - 1} "
                       f"and this one (process 0) has 0: give every process its own id")
    if k in joined:
        raise _Refusal(f"two processes have process_id={k} ({_who(joined[k][1])} and {_who(hello)}): give every "
                       f"process its own id in 0..{n - 1}")
    joined[k] = (conn, hello)


def _processes(ids) -> str:
    ids = list(ids)
    return ("process " if len(ids) == 1 else "processes ") + ", ".join(map(str, ids))


# -- processes 1..n-1 -------------------------------------------------------------------------------

def _check_in(address: str, n: int, k: int, timeout_s: float, deadline: float) -> socket.socket:
    host, port = split_address(address)
    why = "nothing answered"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise JoinError(
                f"process {k} could not reach the run's coordinator (process 0) at {address} within {timeout_s:g} s "
                f"({why}). Start process 0 (it listens there), check the address and port every process was given, "
                f"or allow more time with initialization_timeout (PXLA_MP_INIT_TIMEOUT)")
        try:
            sock = socket.create_connection((host, port), timeout=min(remaining, 2.0))
            break
        except OSError as e:
            why = e.strerror or str(e)
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    try:
        send(sock, _hello(k, n))
        sock.settimeout(max(0.1, deadline - time.monotonic()) + _REPLY_MARGIN_S)
        reader, messages = LineReader(sock), []
        while not messages and not reader.closed:
            messages = reader.feed()
    except TimeoutError:
        sock.close()
        raise JoinError(f"process {k} reached {address}, but nothing there answered as process 0 of the run "
                        f"within {timeout_s:g} s: another program may use port {port}. Start process 0 with "
                        f"pxla_mlir.distributed.initialize, on a free port") from None
    reply = messages[0] if messages else None
    if isinstance(reply, dict) and reply.get("go") is True:
        sock.settimeout(None)
        return sock
    sock.close()
    if isinstance(reply, dict) and "error" in reply:
        raise JoinError(f"the run cannot start: {reply['error']}")
    raise JoinError(f"process {k} reached {address}, but what answered is not process 0 of a pxla_mlir run "
                    f"({'it closed the connection' if reply is None else 'an unknown reply'}): another program may "
                    f"use port {port}, or process 0 called jax.distributed.initialize itself. Every process must "
                    f"call pxla_mlir.distributed.initialize with the same coordinator address")
