"""One CAN bus across processes on this machine: a python-can *virtual* channel in this process
joined to one in another process through a connected socket (e.g. one end of
``socket.socketpair()`` passed to a child process).

python-can's virtual bus lives inside one process, and a kernel ``vcan`` (socketcan) needs a
kernel module this machine does not have. For tests and benches that need a second process on
the bus — a controller process killed with SIGKILL while simulated drives watch — each process
keeps its ordinary virtual channel and a :class:`VirtualChannelLink` forwards every frame sent on
it to the other process and sends every frame from the other process on it. Nothing else
changes: the canopen stack on either side opens ``interface: virtual`` as usual.

A frame crosses as 16 bytes (``FRAME``: arbitration id, flags — extended, remote, error — DLC, 8
data bytes); frames queued together (a SYNC cycle's burst) cross in one write. When the other
process dies the socket reports end-of-file and the link stops: from then on nothing of it reaches
the bus, as when a node's cable is pulled. Latency: two thread hand-offs and a socket write, tens to
hundreds of µs.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

import can

FRAME = struct.Struct("<IBB2x8s")  # arbitration id, flags, dlc, (pad), data
EXTENDED, REMOTE, ERROR = 1, 2, 4


def encode(message: can.Message) -> bytes:
    flags = (
        (EXTENDED if message.is_extended_id else 0)
        | (REMOTE if message.is_remote_frame else 0)
        | (ERROR if message.is_error_frame else 0)
    )
    data = bytes(message.data)
    return FRAME.pack(message.arbitration_id, flags, message.dlc, data.ljust(8, b"\0"))


def decode(frame: bytes) -> can.Message:
    arbitration_id, flags, dlc, data = FRAME.unpack(frame)
    return can.Message(
        arbitration_id=arbitration_id,
        is_extended_id=bool(flags & EXTENDED),
        is_remote_frame=bool(flags & REMOTE),
        is_error_frame=bool(flags & ERROR),
        dlc=dlc,
        data=b"" if flags & REMOTE else data[:dlc],
    )


class VirtualChannelLink:
    """Joins virtual ``channel`` of this process to the process at the other end of ``sock``
    (which this link then owns). Two daemon threads; :meth:`close` stops them."""

    def __init__(self, channel: str, sock: socket.socket) -> None:
        self.channel = channel
        self.sock = sock
        self.bus = can.Bus(interface="virtual", channel=channel)  # does not hear its own sends
        self.sent = 0  # frames from this process to the other
        self.received = 0  # frames from the other process onto this channel
        self.ended = threading.Event()  # the other side hung up (or close())
        self._threads = [
            threading.Thread(target=self._outbound, name="ct-can-link-out", daemon=True),
            threading.Thread(target=self._inbound, name="ct-can-link-in", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _outbound(self) -> None:
        while not self.ended.is_set():
            message = self.bus.recv(timeout=0.05)
            if message is None:
                continue
            # What else is queued already goes in the same write (a SYNC cycle's RPDOs and
            # SYNC come in a burst): one system call and one wake-up on the other side.
            frames = [encode(message)]
            while len(frames) < 64 and (message := self.bus.recv(timeout=0.0)) is not None:
                frames.append(encode(message))
            try:
                self.sock.sendall(b"".join(frames))
            except OSError:
                break
            self.sent += len(frames)
        self.ended.set()

    def _inbound(self) -> None:
        pending = b""
        while not self.ended.is_set():
            try:
                chunk = self.sock.recv(64 * FRAME.size)
            except OSError:
                break
            if not chunk:
                break  # the other process is gone
            pending += chunk
            whole = len(pending) - len(pending) % FRAME.size
            try:
                for offset in range(0, whole, FRAME.size):
                    self.bus.send(decode(pending[offset : offset + FRAME.size]))
                    self.received += 1
            except can.CanError:
                break  # our bus was shut down
            pending = pending[whole:]
        self.ended.set()

    def close(self) -> None:
        self.ended.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(2.0)
        self.sock.close()
        self.bus.shutdown()
