package load

import "time"

// Upper bounds on every size a Config (or a flag) can ask for. Each is
// derived from the memory it would cost, so that nothing a user can type
// makes the driver allocate more than about a gigabyte; Config.Check (and
// Run, before anything is sent) refuses larger values with a *FieldError
// naming the setting, which the CLI turns into its flag's name.
const (
	// MaxRate is the highest arrival rate, in requests per second, of any
	// point of a Shape. One driver process tops out far below it (about
	// 50,000 req/s per core); the bound keeps the arrival count of any
	// timetable within int64 and the default queue depth within
	// MaxQueueDepth at the default budget.
	MaxRate = 1_000_000
	// MaxWorkers bounds Workers and Concurrency. A worker holds about 40 KiB
	// (a 4 KiB body buffer, 16 KiB of parse scratch, a 16 KiB read buffer per
	// host, its goroutine stack): 10,000 workers are about 400 MiB.
	MaxWorkers = 10_000
	// MaxQueueDepth bounds the arrival queue, whether given or derived as
	// rate × p99 budget: 4 Mi entries of 32 bytes are 128 MiB.
	MaxQueueDepth = 1 << 22
	// MaxP99Budget is the longest response-time budget: the histograms'
	// ceiling is 10 minutes.
	MaxP99Budget = 10 * time.Minute
	// MaxWindowDuration bounds one window: its per-second timeline costs
	// about 2 KiB a second (two coarse latency histograms, and counts in up
	// to nine stripes): about 170 MiB for a day.
	MaxWindowDuration = 24 * time.Hour
	// MaxWindows bounds the windows of a step, and MaxRunDuration their
	// total length: the report keeps every second's timeline, at most
	// about 350 bytes of JSON a second, so a day is about 30 MiB, well
	// under MaxReportBytes.
	MaxWindows     = 1000
	MaxRunDuration = 24 * time.Hour
	// MaxSegments bounds the pieces of a Shape (the --steps list) and the
	// rungs of a sweep. Each piece is a row of the report, with two small
	// histograms (24 KiB each) per stripe of every window.
	MaxSegments = 100
	// MaxBodyBytes bounds a request body (held once per target) and
	// MaxTargetsFileBytes a targets file.
	MaxBodyBytes        = 64 << 20
	MaxTargetsFileBytes = 64 << 20
	// MaxReportBytes bounds a report file that ReadReport reads (check,
	// report, merge, plan): decoding one costs several times its size in
	// memory. MaxRunDuration keeps what the driver writes under it.
	MaxReportBytes = 64 << 20
)
