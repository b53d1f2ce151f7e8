package redisquota

import "github.com/redis/go-redis/v9"

// gcraScript decides one request, or takes one lease, with GCRA (the
// generic cell rate algorithm) in one round trip. The key holds the
// theoretical arrival time (TAT) in microseconds of Redis's own clock, so
// instances with skewed clocks still share one limit.
//
//	KEYS[1]  the bucket
//	ARGV[1]  emission interval T: microseconds per token (1e6 / rate)
//	ARGV[2]  tolerance tau: burst * T
//	ARGV[3]  the fewest tokens to grant (the request's cost)
//	ARGV[4]  the most tokens to grant (cost, or a lease's size)
//	ARGV[5]  the caller's clock in microseconds, only to measure skew
//
// It returns {granted, retry_us, remaining, reset_us, skew_us}: granted is
// 0 for a refusal, retry_us when the bucket will hold ARGV[3] tokens,
// remaining the whole tokens left, reset_us until the bucket is full, and
// skew_us how far Redis's clock is ahead of the caller's.
var gcraScript = redis.NewScript(`
local T = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local want_min = tonumber(ARGV[3])
local want_max = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local skew = now - tonumber(ARGV[5])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local avail = math.floor((now + tau - tat) / T + 1e-9)
if avail < want_min then
  return {0, math.ceil(tat + want_min * T - tau - now), math.max(avail, 0), math.ceil(tat - now), skew}
end
local grant = math.min(avail, want_max)
tat = tat + grant * T
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return {grant, 0, avail - grant, math.ceil(tat - now), skew}
`)
