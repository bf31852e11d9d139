-- The SHA-1 (hex) of ARGV[1], computed by the server: the hash by which EVALSHA names a script,
-- and the digest by which release messages name a waiter's token. lockkit's client computes no
-- SHA-1 (core/internal/script/sender.go), so that it runs in FIPS 140-only mode. Always sent whole
-- (EVAL), with no keys: it is shorter than its own hash would be.
return redis.sha1hex(ARGV[1])
