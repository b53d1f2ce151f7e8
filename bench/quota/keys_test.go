package quota_test

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/quota"
)

// rssBytes reads this process's resident set size from /proc (Linux).
func rssBytes(tb testing.TB) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skip("no /proc/self/status: RSS is measured on Linux only")
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, _ := strconv.Atoi(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))))
			return float64(kb) * 1024
		}
	}
	return 0
}

func heapInUse() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse)
}

// BenchmarkMillionKeys offers 1 000 000 distinct keys, each once, to a
// quota whose table is bounded at max-keys, and reports the decision
// throughput, the keys held at the end, and the heap and RSS growth. The
// keys are built before timing, and their own memory is subtracted by
// measuring the baseline after building them.
func BenchmarkMillionKeys(b *testing.B) {
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, maxKeys := range []int{10_000, 100_000, 1_000_000} {
		b.Run("max-keys="+strconv.Itoa(maxKeys), func(b *testing.B) {
			for b.Loop() {
				heap0, rss0 := heapInUse(), rssBytes(b)
				q, _ := quota.New(quota.Config{Rate: 10, Burst: 10, MaxKeys: maxKeys})
				start := time.Now()
				for _, k := range keys {
					_ = q.Allow(k)
				}
				el := time.Since(start)
				b.ReportMetric(n/el.Seconds(), "decisions/s")
				b.ReportMetric(float64(q.Len()), "keys")
				b.ReportMetric((heapInUse()-heap0)/(1<<20), "heap-MiB")
				b.ReportMetric((rssBytes(b)-rss0)/(1<<20), "rss-growth-MiB")
				runtime.KeepAlive(q)
			}
		})
	}
}
