-- POST /partners/external/intake, a new case every time (as bench/intake_create.lua): each
-- create queues one case.created event for the partner that sent it, whose webhook endpoint
-- is the receiver of bench/webhooks.sh. Settings (environment, from bench/webhooks.sh):
--   BENCH_TOKENS   a file of access tokens, one a line, each a partner's: requests go round
--                  them, so every partner sends the same share
--   BENCH_RATE     creates per second over all threads; 0: each connection sends its next
--                  request as soon as the last is answered
--   BENCH_THREADS  wrk's -t, which shares the rate between the threads
--   BENCH_LIMIT    a thread stops after this many answers (0: when wrk's -d ends)
local dir = os.getenv("BENCH_DIR")
dofile(dir .. "/report.lua")
dofile(dir .. "/enquiry.lua")
dofile(dir .. "/threads.lua")

local tag = os.getenv("BENCH_TAG")
local tokens = {}
for line in io.lines(os.getenv("BENCH_TOKENS")) do
   if line ~= "" then
      tokens[#tokens + 1] = "Bearer " .. line
   end
end
assert(#tokens > 0, "BENCH_TOKENS holds no token")

local headers = { ["Content-Type"] = "application/json" }
local counter = 0

function request()
   counter = counter + 1
   headers["Authorization"] = tokens[counter % #tokens + 1]
   local email = string.format("c-%s-%d-%d@example.com", tag, tid, counter)
   return wrk.format("POST", "/partners/external/intake", headers, enquiry_body(email))
end

-- Pacing: wrk calls delay() before each request of a connection and sends it that many
-- milliseconds later. The thread hands out send times on a fixed schedule, one per
-- 1000 * threads / rate ms, whichever connection asks; a thread that falls behind (every
-- connection waiting for an answer) does not catch up in a burst, so the rate achieved
-- shows it. The schedule runs on the monotonic clock, which wrk's Lua reaches through
-- LuaJIT's FFI.
local rate = tonumber(os.getenv("BENCH_RATE") or "0")
if rate > 0 then
   local ffi = require("ffi")
   ffi.cdef [[
      typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
      int clock_gettime(int clock_id, bench_timespec *tp);
   ]]
   local CLOCK_MONOTONIC = 1
   local ts = ffi.new("bench_timespec")
   local function now_ms()
      ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
      return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
   end
   local interval = 1000 * tonumber(os.getenv("BENCH_THREADS")) / rate
   local next_send
   function delay()
      local now = now_ms()
      next_send = math.max((next_send or now) + interval, now)
      return math.floor(next_send - now + 0.5)
   end
end

-- A backlog of a given size: each thread stops at its share. Requests still in flight then
-- may be stored too; bench/webhooks.sh counts what the database holds.
local limit = tonumber(os.getenv("BENCH_LIMIT") or "0")
if limit > 0 then
   local answers = 0
   function response()
      answers = answers + 1
      if answers >= limit then
         wrk.thread:stop()
      end
   end
end
