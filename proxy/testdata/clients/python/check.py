"""check.py runs the same commands as a Python application would, with
redis-py, against the Redis (or squeeze proxy) at URL, and prints one JSON
line per step: what the library returned, with byte strings reduced to their
length and SHA-256. It fails (exit 1) when a value read back differs from the
value written.

Usage: python3 check.py URL KEY_PREFIX
(proxy/clients_test.go runs it against Redis and through the proxy and
compares the two transcripts.)
"""

import hashlib
import json
import sys
import time

import redis

failed = False


def doc(n, seed):
    """A JSON document of about n bytes, the same on every run."""
    items, size, i = [], 2, 0
    while size < n:
        s = json.dumps({"id": seed * 100000 + i, "name": "user-%d" % ((i * 7919) % 1000),
                        "active": i % 3 == 0, "tags": ["redis", "json", "t%d" % (i % 17)],
                        "score": (i * 31) % 997}, separators=(",", ":"))
        items.append(s)
        size += len(s) + 1
        i += 1
    return ("[" + ",".join(items) + "]").encode()


def digest(v):
    if isinstance(v, (bytes, bytearray)):
        return {"len": len(v), "sha256": hashlib.sha256(v).hexdigest()[:16]}
    if isinstance(v, (list, tuple)):
        return [digest(x) for x in v]
    if isinstance(v, dict):
        return [[digest(k), digest(v[k])] for k in sorted(v)]
    return v


def step(name, v):
    print(json.dumps({"step": name, "reply": digest(v)}), flush=True)


def same(name, got, want):
    global failed
    if got != want:
        print("%s: read back %s bytes that differ from the %d written"
              % (name, None if got is None else len(got), len(want)), file=sys.stderr)
        failed = True


def main():
    url, prefix = sys.argv[1], sys.argv[2]
    r = redis.Redis.from_url(url, socket_timeout=10)

    def k(s):
        return prefix + s

    big, big2 = doc(20000, 1), doc(48000, 2)
    binary = bytes(i % 256 for i in range(25600))

    # Strings: a JSON document, read whole and in parts.
    step("SET doc", r.set(k("doc"), big))
    got = r.get(k("doc"))
    same("GET doc", got, big)
    step("GET doc", got)
    step("STRLEN doc", r.strlen(k("doc")))
    step("GETRANGE doc", r.getrange(k("doc"), 0, 40))
    step("APPEND doc", r.append(k("doc"), b',"tail"'))
    same("GET doc after APPEND", r.get(k("doc")), big + b',"tail"')
    step("SET doc GET", r.set(k("doc"), big2, get=True))
    step("GETEX doc", r.getex(k("doc"), ex=100))
    step("TTL doc", r.ttl(k("doc")))

    # Bytes that are not UTF-8.
    step("SET binary", r.set(k("binary"), binary))
    got = r.get(k("binary"))
    same("GET binary", got, binary)
    step("GET binary", got)

    # Hash field values, list elements and stream entries.
    step("HSET", r.hset(k("h"), mapping={"big": big, "small": "v", "n": "42"}))
    h = r.hgetall(k("h"))
    same("HGETALL big", h.get(b"big"), big)
    step("HGETALL", h)
    step("HSTRLEN", r.hstrlen(k("h"), "big"))
    step("HINCRBY", r.hincrby(k("h"), "n", 8))
    step("RPUSH", r.rpush(k("l"), big, big2, "x"))
    lst = r.lrange(k("l"), 0, -1)
    same("LRANGE 1", lst[1], big2)
    step("LRANGE", lst)
    step("LPOP", r.lpop(k("l")))
    step("XADD", r.xadd(k("s"), {"body": big}, id="1-1"))
    step("XRANGE", r.xrange(k("s")))

    # The library's own helpers: a scan iterator over hash fields, a
    # blocking pop; and more commands that return values.
    r.hset(k("h"), "big2", big2)
    scanned = dict(r.hscan_iter(k("h"), count=2))
    same("HSCAN big2", scanned.get(b"big2"), big2)
    step("HSCAN", scanned)
    r.rpush(k("q"), big2)
    popped = r.blpop(k("q"), timeout=5)
    same("BLPOP", popped and popped[1], big2)
    step("BLPOP", popped)
    step("LMOVE", r.lmove(k("l"), k("l3"), "LEFT", "RIGHT"))
    step("MSET", r.mset({k("m1"): big, k("m2"): big2}))
    step("MGET m", r.mget([k("m1"), k("m2"), k("none")]))
    step("SETRANGE", r.setrange(k("m1"), 5, "squeeze"))
    same("GET after SETRANGE", r.get(k("m1")), big[:5] + b"squeeze" + big[12:])
    step("GETRANGE -40 -1", r.getrange(k("m1"), -40, -1))
    step("XGROUP", r.xgroup_create(k("s"), "g", id="0"))
    step("XREADGROUP", r.xreadgroup("g", "c", {k("s"): ">"}, count=10))

    # A transaction and a pipeline.
    tx = r.pipeline(transaction=True)
    tx.set(k("t"), big).get(k("t")).strlen(k("t")).incr(k("counter")).getdel(k("t"))
    step("MULTI", tx.execute())
    p = r.pipeline(transaction=False)
    for i in range(40):
        p.set(k("p:%d" % i), doc(2000 + 500 * i, i))
    for i in range(40):
        p.get(k("p:%d" % i))
    replies = p.execute()
    for i in range(40):
        same("pipeline GET p:%d" % i, replies[40 + i], doc(2000 + 500 * i, i))
    step("pipeline", replies)
    step("MGET", r.mget([k("p:%d" % i) for i in range(40)]))

    # Pub/sub: a message published through one connection reaches a
    # subscriber on another unchanged.
    ps = r.pubsub()
    ps.subscribe(k("chan"))
    ps.get_message(timeout=5)  # the subscribe confirmation
    step("PUBLISH", r.publish(k("chan"), big))
    msg, deadline = None, time.time() + 5
    while msg is None and time.time() < deadline:
        msg = ps.get_message(timeout=1)
    if msg is None:
        raise RuntimeError("no message within 5 s")
    same("message", msg["data"], big)
    step("message", msg["data"])
    ps.close()

    # A lock with a long token, as redis-py's Lock keeps it: SET NX PX to
    # acquire (the proxy stores the 300 bytes compressed), Lua scripts
    # that compare the stored token with the holder's to extend, reacquire
    # and release. A holder with another token is refused.
    token = ("owner-" + "squeeze-worker-" * 25)[:300]
    lock = r.lock(k("lock"), timeout=30)
    step("Lock acquire", lock.acquire(blocking=False, token=token))
    step("Lock owned", lock.owned())
    step("Lock extend", lock.extend(10))
    step("Lock reacquire", lock.reacquire())
    other = r.lock(k("lock"), timeout=30)
    other.local.token = (token[:-1] + "x").encode()
    try:
        other.release()
        step("Lock release by another", "released")
    except redis.exceptions.LockNotOwnedError as err:
        step("Lock release by another", "error: %s" % err)
    step("Lock release", lock.release())
    step("Lock key after release", r.exists(k("lock")))

    # Errors come back as Redis words them.
    try:
        r.incr(k("doc"))
        step("INCR doc", "no error")
    except redis.ResponseError as err:
        step("INCR doc", "error: %s" % err)
    r.close()


if __name__ == "__main__":
    main()
    sys.exit(1 if failed else 0)
