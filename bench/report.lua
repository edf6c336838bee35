-- Shared by every bench/*.lua script: one machine-readable summary line when wrk finishes.
-- wrk counts HTTP statuses >= 400 as errors.status; connect/read/write/timeout are socket errors.
function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "BENCH requests=%d duration_us=%d rps=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f status_errors=%d socket_errors=%d\n",
      summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
      latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
      e.status, e.connect + e.read + e.write + e.timeout))
end
