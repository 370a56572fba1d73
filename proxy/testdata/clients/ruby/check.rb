# check.rb runs the same commands as a Ruby application would, with
# redis-rb, against the Redis (or squeeze proxy) at URL, and prints one JSON
# line per step: what the library returned, with strings reduced to their
# length and SHA-256. It fails (exit 1) when a value read back differs from
# the value written.
#
# Usage: ruby check.rb URL KEY_PREFIX
# (proxy/clients_test.go runs it against Redis and through the proxy and
# compares the two transcripts.)
require 'digest'
require 'json'
require 'redis'

$failed = false

# doc is a JSON document of about n bytes, the same on every run.
def doc(n, seed)
  items = []
  size = 2
  i = 0
  while size < n
    s = JSON.generate({ id: seed * 100_000 + i, name: "user-#{(i * 7919) % 1000}", active: i % 3 == 0,
                        tags: ['redis', 'json', "t#{i % 17}"], score: (i * 31) % 997 })
    items << s
    size += s.bytesize + 1
    i += 1
  end
  "[#{items.join(',')}]"
end

def digest(v)
  case v
  when String then { len: v.bytesize, sha256: Digest::SHA256.hexdigest(v)[0, 16] }
  when Array then v.map { |x| digest(x) }
  when Hash then v.keys.sort.map { |key| [digest(key), digest(v[key])] }
  else v
  end
end

def step(name, v)
  puts JSON.generate({ step: name, reply: digest(v) })
  $stdout.flush
end

def same(name, got, want)
  return if got.is_a?(String) && got.b == want.b

  warn "#{name}: read back #{got.nil? ? 'nil' : got.bytesize} bytes that differ from the #{want.bytesize} written"
  $failed = true
end

url, prefix = ARGV
r = Redis.new(url: url, timeout: 10)
k = ->(s) { prefix + s }
big = doc(20_000, 1)
big2 = doc(48_000, 2)
binary = (0...25_600).map { |i| i % 256 }.pack('C*')

# Strings: a JSON document, read whole and in parts.
step('SET doc', r.set(k['doc'], big))
got = r.get(k['doc'])
same('GET doc', got, big)
step('GET doc', got)
step('STRLEN doc', r.strlen(k['doc']))
step('GETRANGE doc', r.getrange(k['doc'], 0, 40))
step('APPEND doc', r.append(k['doc'], ',"tail"'))
same('GET doc after APPEND', r.get(k['doc']), big + ',"tail"')
step('SET doc GET', r.call('SET', k['doc'], big2, 'GET'))
step('GETEX doc', r.call('GETEX', k['doc'], 'EX', '100'))
step('TTL doc', r.ttl(k['doc']))

# Bytes that are not UTF-8.
step('SET binary', r.set(k['binary'], binary))
got = r.get(k['binary'])
same('GET binary', got, binary)
step('GET binary', got)

# Hash field values, list elements and stream entries.
step('HSET', r.hset(k['h'], 'big', big, 'small', 'v', 'n', '42'))
h = r.hgetall(k['h'])
same('HGETALL big', h['big'], big)
step('HGETALL', h)
step('HSTRLEN', r.call('HSTRLEN', k['h'], 'big'))
step('HINCRBY', r.hincrby(k['h'], 'n', 8))
step('RPUSH', r.rpush(k['l'], [big, big2, 'x']))
list = r.lrange(k['l'], 0, -1)
same('LRANGE 1', list[1], big2)
step('LRANGE', list)
step('LPOP', r.lpop(k['l']))
step('XADD', r.xadd(k['s'], { body: big }, id: '1-1'))
step('XRANGE', r.xrange(k['s']))

# The library's own helpers: a scan iterator over hash fields, a blocking
# pop; and more commands that return values.
r.hset(k['h'], 'big2', big2)
scanned = r.hscan_each(k['h'], count: 2).to_h
same('HSCAN big2', scanned['big2'], big2)
step('HSCAN', scanned)
r.rpush(k['q'], big2)
popped = r.blpop(k['q'], timeout: 5)
same('BLPOP', popped && popped[1], big2)
step('BLPOP', popped)
step('LMOVE', r.lmove(k['l'], k['l3'], 'LEFT', 'RIGHT'))
step('MSET', r.mset(k['m1'], big, k['m2'], big2))
step('MGET m', r.mget(k['m1'], k['m2'], k['none']))
step('SETRANGE', r.setrange(k['m1'], 5, 'squeeze'))
same('GET after SETRANGE', r.get(k['m1']), big[0, 5] + 'squeeze' + big[12..])
step('GETRANGE -40 -1', r.getrange(k['m1'], -40, -1))
step('XGROUP', r.xgroup(:create, k['s'], 'g', '0'))
step('XREADGROUP', r.xreadgroup('g', 'c', k['s'], '>', count: 10))

# A transaction and a pipeline.
step('MULTI', r.multi do |tx|
  tx.set(k['t'], big)
  tx.get(k['t'])
  tx.strlen(k['t'])
  tx.incr(k['counter'])
  tx.call('GETDEL', k['t'])
end)
replies = r.pipelined do |p|
  40.times { |i| p.set(k["p:#{i}"], doc(2000 + 500 * i, i)) }
  40.times { |i| p.get(k["p:#{i}"]) }
end
40.times { |i| same("pipeline GET p:#{i}", replies[40 + i], doc(2000 + 500 * i, i)) }
step('pipeline', replies)
step('MGET', r.mget(*(0...40).map { |i| k["p:#{i}"] }))

# Pub/sub: a message published through one connection reaches a subscriber
# on another unchanged.
sub = Redis.new(url: url, timeout: 10)
received = Queue.new
subscriber = Thread.new do
  sub.subscribe_with_timeout(5, k['chan']) do |on|
    on.subscribe { received << :ready }
    on.message do |_channel, message|
      received << message
      sub.unsubscribe
    end
  end
rescue StandardError => e
  received << e
end
raise 'no subscribe confirmation' unless received.pop == :ready

step('PUBLISH', r.publish(k['chan'], big))
subscriber.join(5)
msg = received.empty? ? nil : received.pop
raise "no message within 5 s (#{msg.inspect})" unless msg.is_a?(String)

same('message', msg, big)
step('message', msg)

# Errors come back as Redis words them.
begin
  r.incr(k['doc'])
  step('INCR doc', 'no error')
rescue Redis::CommandError => e
  step('INCR doc', "error: #{e.message}")
end
r.close
exit($failed ? 1 : 0)
