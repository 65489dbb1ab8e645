"""How the Redis store lays its keys out over a Redis Cluster.

A Lua script may only touch keys of one hash slot on a cluster, and every write of the
store touches an episode, the live index and (when the episode ends) the archive
stream together. So the keys are split into a fixed number of partitions, each a
complete store of its own under the prefix ``{prefix}{p<i>}:`` — the ``{p<i>}`` is the
Redis Cluster hash tag that puts all of them in one slot: its episodes, its live index,
its archive stream and dead letters, and the rate buckets hashed to it. A script call
then touches one partition, and a bulk call (a batch of steps, the coalesced requests
of one loop turn) becomes one script call per partition, sent concurrently.

An episode's partition is in its id, ``ep_p<i>-<128 random bits>``: a step needs no
lookup to find it, and the episodes of one create (a GRPO group) get ids of one
partition, chosen at random, so that the group is added all or none and the partitions
fill evenly. An id without a partition tag (any other id) is in partition 0.

On one Redis (or Sentinel's primary) there is one partition and it is untagged: the key
names, ids and archive tokens are those of the store before partitions, so a running
deployment's data stays valid across the upgrade.

Archive tokens and dead-letter ids carry their partition, ``p<i>-<stream id>``, so that
acknowledging or retrying them needs no lookup either.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

_TAGGED_ID = re.compile(r"ep_p([0-9]{1,4})-")
_TAGGED_TOKEN = re.compile(r"p([0-9]{1,4})-(.*)", re.DOTALL)


def new_episode_id() -> str:
    """An unguessable episode id: 128 random bits."""
    return f"ep_{secrets.token_urlsafe(16)}"


@dataclass(frozen=True, eq=False)
class Partition:
    """The keys of one partition; compared by identity (a layout holds each once)."""

    index: int
    prefix: str
    stream: str = field(init=False)
    """The archive backlog."""
    dead: str = field(init=False)
    """The dead letters."""
    live_keys: list[str] = field(init=False)
    """The five keys of the live index (``service.store.redis``)."""

    def __post_init__(self) -> None:
        live = f"{self.prefix}live"
        keys = [live, *(f"{live}:{part}" for part in ("env", "count", "tenant", "bytes"))]
        object.__setattr__(self, "stream", f"{self.prefix}archive")
        object.__setattr__(self, "dead", f"{self.prefix}archive:dead")
        object.__setattr__(self, "live_keys", keys)

    def key(self, episode_id: str) -> str:
        return f"{self.prefix}episode:{episode_id}"

    def log_key(self, episode_id: str) -> str:
        """The episode's log: a name no episode's key can take, whatever its id."""
        return f"{self.prefix}log:{episode_id}"

    def bucket_key(self, bucket: str) -> str:
        return f"{self.prefix}rate:{bucket}"


class Layout:
    """The partitions of a store: one untagged (one Redis), or ``count`` tagged ones
    (a cluster)."""

    def __init__(self, prefix: str, count: int | None = None) -> None:
        if count is None:
            self.partitions = [Partition(0, prefix)]
        else:
            if count < 1:
                raise ValueError(f"a cluster layout needs at least one partition, not {count}")
            if "{" in prefix or "}" in prefix:
                raise ValueError(
                    f"the Redis prefix {prefix!r} holds a brace: on a cluster, the store's "
                    "own hash tags must come first"
                )
            self.partitions = [Partition(i, f"{prefix}{{p{i}}}:") for i in range(count)]
        self.tagged = count is not None

    def of_episode(self, episode_id: str) -> Partition:
        if self.tagged and (match := _TAGGED_ID.match(episode_id)):
            index = int(match[1])
            if index < len(self.partitions):
                return self.partitions[index]
        return self.partitions[0]

    def of_bucket(self, bucket: str) -> Partition:
        """A bucket's partition: a stable hash of its name (Python's ``hash`` is salted
        per process, and every replica must agree)."""
        if len(self.partitions) == 1:
            return self.partitions[0]
        digest = hashlib.blake2b(bucket.encode(), digest_size=8).digest()
        return self.partitions[int.from_bytes(digest) % len(self.partitions)]

    def new_ids(self, n: int) -> list[str]:
        """Ids for the ``n`` episodes of one create, all in one partition."""
        if not self.tagged:
            return [new_episode_id() for _ in range(n)]
        index = secrets.randbelow(len(self.partitions))
        return [f"ep_p{index}-{secrets.token_urlsafe(16)}" for _ in range(n)]

    def token(self, partition: Partition, stream_id: str) -> str:
        """An archive token or dead-letter id for an entry of ``partition``'s streams."""
        return f"p{partition.index}-{stream_id}" if self.tagged else stream_id

    def parse_token(self, token: str) -> tuple[Partition, str] | None:
        """The partition and stream id of a token; None for no token of this layout."""
        if not self.tagged:
            return self.partitions[0], token
        match = _TAGGED_TOKEN.fullmatch(token)
        if match is None or int(match[1]) >= len(self.partitions):
            return None
        return self.partitions[int(match[1])], match[2]

    def by_partition(self, tokens: Sequence[str]) -> dict[Partition, list[str]]:
        """The stream ids of ``tokens`` by partition, in order; unknown tokens left out."""
        grouped: dict[Partition, list[str]] = {}
        for token in tokens:
            if (parsed := self.parse_token(token)) is not None:
                grouped.setdefault(parsed[0], []).append(parsed[1])
        return grouped
