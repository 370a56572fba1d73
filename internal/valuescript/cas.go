package valuescript

// CAS stores ARGV[2] at KEYS[1], keeping its TTL, if the key still holds
// a value whose SHA-1 is ARGV[1], and replies 1 (else 0); it reads with
// GETEX so that Redis does not start tracking the key for the client. It
// stores a value a write on compressed values left uncompressed
// (RecompressMarker) in its compressed form, unless another client wrote
// the key in between.
const CAS = `local cur = redis.pcall('GETEX', KEYS[1])
if type(cur) == 'string' and redis.sha1hex(cur) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
return 0`

// CASSHA names CAS for EVALSHA.
var CASSHA = SHA(CAS)
