"""Reads keys straight from Redis with redis-py and decodes them with the
squeeze_frames module, as a Python batch job without a proxy would:
read.py REDIS_URL KEY... Prints each key and the value's SHA-256."""
import hashlib
import os
import sys

import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../ports/python"))
import squeeze_frames  # noqa: E402

r = redis.Redis.from_url(sys.argv[1])
for key in sys.argv[2:]:
    value = squeeze_frames.decode(r.get(key), dictionary=squeeze_frames.redis_dictionaries(r))
    print(key, hashlib.sha256(value).hexdigest())
