"""The Lua scripts of the Redis store (``service.store.redis``), each one atomic step on
the server. On a cluster every key a script touches is in one partition
(``service.store.partitions``): the keys are passed in ``KEYS``, never built in Lua.
"""

_NOW_MS = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
"""
"""Lua: the server's clock in milliseconds, as ``now``."""

_LIVE_KEYS = "local LIVE = {live}\n"
"""Lua: where the five keys of the live index start in ``KEYS`` (formatted in)."""

_NOT_LIVE = """
local function decrease(hash, field, by)
  if by == 0 then return end  -- Lua writes -0 as '-0', which HINCRBY refuses
  if redis.call('HINCRBY', hash, field, -by) <= 0 then redis.call('HDEL', hash, field) end
end
local function not_live(key)
  if redis.call('ZREM', KEYS[LIVE], key) == 1 then
    local entry = redis.call('HGET', KEYS[LIVE + 1], key)
    redis.call('HDEL', KEYS[LIVE + 1], key)
    if entry then
      local env, tenant, bytes = string.match(entry, '^(.*)\\n([^\\n]+)\\n(%d+)$')
      if env then
        decrease(KEYS[LIVE + 3], tenant, 1)
        decrease(KEYS[LIVE + 4], tenant, tonumber(bytes))
      else
        env = entry
      end
      redis.call('HINCRBY', KEYS[LIVE + 2], env, -1)
    end
  end
end
"""
"""Lua: ``not_live(key)`` takes the episode out of the live index, its environment's count
and its tenant's, once (whoever removes it from the index counts it out). An entry of
``live:env`` is the environment, and for a tenant's episode ``env\\ntenant\\nbytes``
(an older entry, the environment alone, is counted out as it was written); a tenant's
fields are deleted at zero."""

_COUNT_OUT = """
local function count_out(limit)
  local due = redis.call('ZRANGEBYSCORE', KEYS[LIVE], '-inf', now, 'LIMIT', 0, limit)
  for _, key in ipairs(due) do
    local left = redis.call('PTTL', key)
    if left == -2 then
      not_live(key)
    else
      redis.call('ZADD', KEYS[LIVE], 'XX', now + math.max(left, 1), key)
    end
  end
  return #due
end
"""
"""Lua: ``count_out(limit)`` looks at up to ``limit`` episodes past their first possible
expiry, and replies how many it looked at. Each is counted out if Redis has forgotten it,
or else looked at again when its current TTL ends (reads and writes refresh the TTL, not
the index)."""


def _live_script(first_live_key: int, body: str) -> str:
    """A script that counts episodes out: ``body`` after ``not_live`` and ``count_out``,
    with the live index's keys from ``KEYS[first_live_key]`` on."""
    return _LIVE_KEYS.format(live=first_live_key) + _NOW_MS + _NOT_LIVE + _COUNT_OUT + body


_PUSH = """
local function push(key, first, last)
  for at = first, last, 1000 do
    redis.call('RPUSH', key, unpack(ARGV, at, math.min(at + 999, last)))
  end
end
"""
"""Lua: ``push(key, first, last)`` appends ``ARGV[first..last]`` to the list ``key``, a
thousand at a time (``unpack`` is bounded by Lua's stack)."""

ADD_MANY = _live_script(
    1,
    _PUSH
    + """
local ttl, checks = tonumber(ARGV[1]), tonumber(ARGV[2])
local looked
local replies = {}
local a, k = 3, 6
while a <= #ARGV do
  local n, env, tenant, size = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local max_live, max_bytes = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local live_elsewhere, bytes_elsewhere = tonumber(ARGV[a + 6]), tonumber(ARGV[a + 7])
  local entries = tonumber(ARGV[a + 8])
  a = a + 9
  local reply = 1
  if max_live or max_bytes then
    looked = looked or count_out(checks)
    local new = 0
    for i = k, k + 2 * n - 1, 2 do
      if not redis.call('ZSCORE', KEYS[LIVE], KEYS[i]) then new = new + 1 end
    end
    local live = tonumber(redis.call('HGET', KEYS[LIVE + 3], tenant) or 0) + live_elsewhere
    local bytes = tonumber(redis.call('HGET', KEYS[LIVE + 4], tenant) or 0) + bytes_elsewhere
    if max_live and live + new > max_live then
      reply = {'live_episodes', max_live, live, new}
    elseif max_bytes and bytes + new * size > max_bytes then
      reply = {'metadata_bytes', max_bytes, bytes, new * size}
    end
    if reply ~= 1 and looked == checks then reply = 0 end
  end
  if reply == 1 then
    local entry = env
    if tenant ~= '' then entry = env .. '\\n' .. tenant .. '\\n' .. size end
    local added = 0
    for i = 0, n - 1 do
      local key, log = KEYS[k + 2 * i], KEYS[k + 2 * i + 1]
      redis.call('HSET', key, 'v', 1, 'd', ARGV[a + i])
      redis.call('PEXPIRE', key, ttl)
      redis.call('DEL', log)
      if entries > 0 then
        push(log, a + n, a + n + entries - 1)
        redis.call('PEXPIRE', log, ttl)
      end
      if redis.call('ZADD', KEYS[LIVE], 'NX', now + ttl, key) == 1 then
        redis.call('HSET', KEYS[LIVE + 1], key, entry)
        added = added + 1
      end
    end
    if added > 0 then
      redis.call('HINCRBY', KEYS[LIVE + 2], env, added)
      if tenant ~= '' then
        redis.call('HINCRBY', KEYS[LIVE + 3], tenant, added)
        if added * size > 0 then redis.call('HINCRBY', KEYS[LIVE + 4], tenant, added * size) end
      end
    end
  end
  replies[#replies + 1] = reply
  a, k = a + n + entries, k + 2 * n
end
return replies
""",
)
"""New episodes, in groups added all or none: ``KEYS`` the live index's five keys, then
(document, log) per episode; ``ARGV`` the TTL (ms), how many expired episodes to look at, then
per group its size, environment, tenant ('' for none), metadata bytes per episode, limits
on the tenant's live episodes and bytes ('' for none), what the tenant holds in the other
partitions (live episodes, bytes: ``service.store.partitions``) and how many entries each
log opens with, then its documents, then those entries. Replies per group 1 (added), a
refusal {quota, limit, used, requested}, or 0: it would be refused, but more expired
episodes may be due than were looked at (``count_out`` runs once, and only for groups
with limits); call again. Run twice (a retry after a lost reply), it counts each episode
once, and writes each log anew."""

LOAD_MANY = """
local ttl = ARGV[1]
local found = {}
for i = 1, #KEYS / 2 do
  local key, log = KEYS[2 * i - 1], KEYS[2 * i]
  local item = redis.call('HMGET', key, 'v', 'd', 'r')
  local entries = false
  if item[3] then
    if ARGV[i + 1] == '1' then item[1], item[2] = false, false end
  elseif item[1] then
    redis.call('PEXPIRE', key, ttl)
    redis.call('PEXPIRE', log, ttl)
    if ARGV[i + 1] == '1' then entries = redis.call('LRANGE', log, 0, -1) end
  end
  found[3 * i - 2], found[3 * i - 1], found[3 * i] = item[1], item[2], entries
end
return found
"""
"""Loads: ``KEYS`` (document, log) per episode; ``ARGV`` the TTL (ms), then per episode '1' to
read its log too, else ''. A flat reply of (version, document, log entries) triples, nil
for a gone episode and for a log not asked for. The TTL of both keys is refreshed, except
a released episode's (field ``r``: ``RELEASE``), which is gone to a read of its log."""

RELEASE = """
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 and redis.call('HSETNX', KEYS[i], 'r', 1) == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    redis.call('DEL', KEYS[i + 1])
  end
end
"""
"""Release archived episodes: ``KEYS`` (document, log) per episode; ``ARGV`` how long the
document stays (ms). The document is marked (``r``), keeps its version and data until
then, and no read refreshes it; the log is deleted. An episode gone, or released before,
is left as it is."""

REPLACE_MANY = _live_script(
    2,
    _PUSH
    + """
local ttl = ARGV[1]
local written = {}
local a = 2
for i = 7, #KEYS, 2 do
  local key, log = KEYS[i], KEYS[i + 1]
  local version, data, kind, before, after = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
    ARGV[a + 4]
  local entries = tonumber(ARGV[a + 5])
  local first = a + 6
  a = first + entries
  local stored = redis.call('HGET', key, 'v')
  if stored and tonumber(stored) == tonumber(version) then
    redis.call('HSET', key, 'v', tonumber(stored) + 1, 'd', data)
    redis.call('PEXPIRE', key, ttl)
    if entries > 0 then push(log, first, first + entries - 1) end
    redis.call('PEXPIRE', log, ttl)
    if kind ~= '' then
      local record = before
      if kind == 'log' then
        record = before .. '[' .. table.concat(redis.call('LRANGE', log, 0, -1), ',') .. ']'
          .. after
      end
      redis.call('XADD', KEYS[1], '*', 'd', record)
      not_live(key)
    end
    written[#written + 1] = 1
  else
    written[#written + 1] = 0
  end
end
return written
""",
)
"""Compare-and-sets: ``KEYS`` = the archive stream, the live index's five keys, then
(document, log) per episode; ``ARGV`` = the TTL (ms), then per episode its version, document,
archive record ('' for none, 'record' for one as it is, 'log' for one around the log:
``base.RecordWithLog``), the record's two parts (the second '' for a record as it is), how
many entries to append, and those entries. A reply of 1 (written) or 0 per episode; the
entries are appended only with a write. A write that queues a record finishes its
episode: it is live no more."""

LIVE = _live_script(1, "return {count_out(ARGV[1]), redis.call('HGETALL', KEYS[3])}")
"""Count the live episodes: ``KEYS`` the live index's five keys; ``ARGV`` how many
episodes past their first possible expiry to look at. Replies how many were looked at, and
the counts by environment."""

USAGE = _live_script(
    1,
    """
return {count_out(ARGV[1]), tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or 0),
  tonumber(redis.call('HGET', KEYS[5], ARGV[2]) or 0)}
""",
)
"""A tenant's usage: ``KEYS`` the live index's five keys; ``ARGV`` how many expired
episodes to look at, the tenant. Replies how many were looked at, its live episodes and
their metadata bytes."""

TAKE = """
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local waits = {}
for i, key in ipairs(KEYS) do
  local interval, burst = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local full_at = math.max(tonumber(redis.call('GET', key) or 0), now) + interval
  local wait = full_at - now - burst * interval
  if wait > 0 then
    waits[i] = wait
  else
    redis.call('SET', key, string.format('%d', full_at), 'PX', math.ceil((full_at - now) / 1000))
    waits[i] = 0
  end
end
return waits
"""
"""Take a token from each bucket: ``KEYS`` the buckets (a bucket may come more than once);
``ARGV`` (microseconds between tokens, burst) per bucket. Each bucket is the time, in
microseconds of the server's clock, at which it is full again, and expires then. Replies
per bucket 0 (taken) or the microseconds until a token is there."""

ACKNOWLEDGE = """
redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
"""
"""Drop archived records: ``KEYS`` the backlog; ``ARGV`` the group, then the records' ids.
A script rather than MULTI, which a cluster client does not offer."""

LEAVE_GROUP = """
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) == 0 then
  redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
end
"""
"""Leave the archivers' group (``ARGV``: the group, the consumer) unless the consumer
still holds records: deleting it would drop them from the group's pending list, and no
other archiver could claim them. One script, so no record is read in between."""

DEAD_LETTER = """
local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])[1]
if not entry then return false end
local data = entry[2][2]
local id = redis.call('XADD', KEYS[2], '*', 'd', data, 'e', ARGV[3], 't', ARGV[4])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return id
"""
"""Move a backlog record to the dead letters: ``KEYS`` the backlog, the dead letters;
``ARGV`` the group, the record's id, the error, the time. Nil if the record is gone."""

RETRY_DEAD = """
local moved = {}
for _, id in ipairs(ARGV) do
  local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
  if entry then
    redis.call('XADD', KEYS[2], '*', 'd', entry[2][2])
    redis.call('XDEL', KEYS[1], id)
    moved[#moved + 1] = id
  end
end
return moved
"""
"""Dead letters back to the backlog: ``KEYS`` the dead letters, the backlog; ``ARGV`` ids.
Every entry of either stream has its record as the first field (``d``)."""

DROP_DEAD = """
local dropped = {}
for _, id in ipairs(ARGV) do
  if redis.call('XDEL', KEYS[1], id) == 1 then dropped[#dropped + 1] = id end
end
return dropped
"""
"""Delete dead letters: ``KEYS`` the dead letters; ``ARGV`` ids; replies the ids deleted."""
