# cluster.rb is check.rb for a Redis Cluster behind squeeze proxies:
# redis-rb's cluster client, given one proxy's address, must find the other
# proxies (never the nodes) and read back every value it wrote, on keys
# spread over all slots. It prints the addresses the client ended up using,
# one per line, as "node HOST:PORT".
#
# Usage: ruby cluster.rb HOST:PORT KEY_PREFIX
require 'redis'

# doc is a JSON-like value of n bytes that compresses well.
def doc(n, i)
  %({"id":#{i},"body":"#{"squeeze cluster document #{i} " * (n / 20 + 1)}"})[0, n]
end

seed, prefix = ARGV
c = Redis.new(cluster: ["redis://#{seed}"], timeout: 10)
failed = false
30.times do |i|
  c.set("#{prefix}doc:#{i}", doc(3000 + 100 * i, i))
  c.hset("#{prefix}h:#{i}", 'f', doc(1000, i))
end
30.times do |i|
  [["GET doc:#{i}", c.get("#{prefix}doc:#{i}"), doc(3000 + 100 * i, i)],
   ["HGET h:#{i}", c.hget("#{prefix}h:#{i}", 'f'), doc(1000, i)]].each do |name, got, want|
    next if got == want

    warn "#{name}: read back #{got.nil? ? 'nil' : got.bytesize} bytes that differ from the #{want.bytesize} written"
    failed = true
  end
end
c.connection.map { |n| "#{n[:host]}:#{n[:port]}" }.uniq.sort.each { |a| puts "node #{a}" }
c.close
exit(failed ? 1 : 0)
