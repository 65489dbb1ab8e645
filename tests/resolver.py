"""A DNS server for one name, standing in for Docker's (127.0.0.11) in front of nginx.

Docker answers a compose service's name with the address of every replica; nginx's
``resolver`` asks it again once ``valid=`` has passed. `Resolver` does the same for one
name on a local UDP port, with the addresses a test sets (and changes, as
``docker compose up --scale`` does): A queries get them, AAAA queries an empty answer,
other names NXDOMAIN. Only what nginx's resolver sends is understood: one question,
no compression in it.
"""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

A, IN = 1, 1
NXDOMAIN = 3


class Resolver:
    """Answers ``name`` with ``addresses`` (IPv4, read at every query) until closed."""

    def __init__(self, name: str, addresses: list[str]) -> None:
        self.name, self.addresses = name, addresses
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.1)
        self.address = f"127.0.0.1:{self._socket.getsockname()[1]}"
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Resolver:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stopped.set()
        self._thread.join()
        self._socket.close()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                query, client = self._socket.recvfrom(512)
            except TimeoutError:
                continue
            self._socket.sendto(self.answer(query), client)

    def answer(self, query: bytes) -> bytes:
        ident, flags = struct.unpack("!HH", query[:4])
        labels, at = [], 12
        while query[at]:
            labels.append(query[at + 1 : at + 1 + query[at]].decode())
            at += 1 + query[at]
        question = query[12 : at + 5]  # the name, its end, type and class
        kind, _ = struct.unpack("!HH", query[at + 1 : at + 5])
        found = ".".join(labels).lower() == self.name
        records = [] if not found or kind != A else list(self.addresses)
        header = struct.pack(
            "!HHHHHH",
            ident,
            0x8400 | (flags & 0x0100) | 0x0080 | (0 if found else NXDOMAIN),  # QR AA RD RA
            1, len(records), 0, 0,
        )  # fmt: skip
        answers = b"".join(
            struct.pack("!HHHIH", 0xC00C, A, IN, 1, 4) + socket.inet_aton(address)
            for address in records  # 0xC00C: the name, as the question (offset 12) says it
        )
        return header + question + answers
