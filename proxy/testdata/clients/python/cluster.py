"""cluster.py is check.py for a Redis Cluster behind squeeze proxies:
redis-py's RedisCluster, given one proxy's address, must find the other
proxies (never the nodes) and read back every value it wrote, on keys spread
over all slots. It prints the addresses the client ended up using, one per
line, as "node HOST:PORT".

Usage: python3 cluster.py HOST:PORT KEY_PREFIX
"""

import sys

from redis.cluster import RedisCluster


def doc(n, i):
    """A JSON-like value of n bytes that compresses well."""
    body = ("squeeze cluster document %d " % i) * (n // 20 + 1)
    return ('{"id":%d,"body":"%s"}' % (i, body))[:n].encode()


def main():
    seed, prefix = sys.argv[1], sys.argv[2]
    host, port = seed.rsplit(":", 1)
    c = RedisCluster(host=host, port=int(port), socket_timeout=10)
    failed = False
    for i in range(30):
        c.set("%sdoc:%d" % (prefix, i), doc(3000 + 100 * i, i))
        c.hset("%sh:%d" % (prefix, i), "f", doc(1000, i))
    for i in range(30):
        for name, got, want in (("GET doc:%d" % i, c.get("%sdoc:%d" % (prefix, i)), doc(3000 + 100 * i, i)),
                                ("HGET h:%d" % i, c.hget("%sh:%d" % (prefix, i), "f"), doc(1000, i))):
            if got != want:
                print("%s: read back %s bytes that differ from the %d written"
                      % (name, None if got is None else len(got), len(want)), file=sys.stderr)
                failed = True
    for a in sorted({"%s:%d" % (n.host, n.port) for n in c.get_nodes()}):
        print("node " + a)
    c.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
