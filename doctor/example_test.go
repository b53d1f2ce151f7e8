package doctor_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/doctor"
)

// Two scrapes a second apart of a gate whose four slots stay held while
// nothing completes and its queue grows.
func ExampleDiagnose() {
	scrape := func(offered, admitted, completed, waiting int, at time.Time) *doctor.Reading {
		text := fmt.Sprintf(`# TYPE sluice_admission_offered_total counter
sluice_admission_offered_total{gate="db",kind="query"} %d
# TYPE sluice_admission_admitted_total counter
sluice_admission_admitted_total{gate="db",kind="query"} %d
# TYPE sluice_admission_rejected_total counter
sluice_admission_rejected_total{gate="db",kind="query",reason="queue_full"} 0
# TYPE sluice_admission_completed_total counter
sluice_admission_completed_total{gate="db",kind="query",outcome="ok"} %d
# TYPE sluice_admission_inflight gauge
sluice_admission_inflight{gate="db"} 4
# TYPE sluice_admission_waiting gauge
sluice_admission_waiting{gate="db"} %d
# TYPE sluice_admission_capacity gauge
sluice_admission_capacity{gate="db"} 4
`, offered, admitted, completed, waiting)
		r, err := doctor.ParseMetrics(strings.NewReader(text), at)
		if err != nil {
			panic(err)
		}
		return r
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := doctor.Diagnose(scrape(100, 100, 96, 0, t0), scrape(108, 100, 96, 8, t0.Add(time.Second)), nil)
	for _, f := range d.Findings {
		fmt.Printf("%s %s: %s\n", f.Severity, f.Code, f.Seen)
	}
	// Output:
	// critical stalled: gate db: 4 slots held and nothing completed in 1.00 s (waiting 8)
	// warn queue_growing_at_capacity: gate db: queue grew 0 → 8 while all 4 slots were busy
}

func ExampleParseGoroutines() {
	dump := `goroutine 7 [select, 3 minutes]:
github.com/sluicehq/sluice/admit.(*Gate).wait(0xc000010000, {0x0, 0x0}, 0x0, 0x1)
	/src/sluice/admit/queue.go:80 +0x1f

goroutine 9 [IO wait]:
internal/poll.(*FD).Read(0xc000100000, {0xc000200000, 0x1000, 0x1000})
	/usr/lib/go/src/internal/poll/fd_unix.go:165 +0x27a
net/http.(*connReader).backgroundRead(0xc000300000)
	/usr/lib/go/src/net/http/server.go:690 +0x37
`
	s, err := doctor.ParseGoroutines(strings.NewReader(dump))
	if err != nil {
		panic(err)
	}
	for _, g := range s.Groups {
		fmt.Printf("%s: %d, longest %d min, in %s\n", g.Where, g.Count, g.LongestMinutes, g.Sites[0].Function)
	}
	// Output:
	// gate queue: 1, longest 3 min, in github.com/sluicehq/sluice/admit.(*Gate).wait
	// network read: 1, longest 0 min, in net/http.(*connReader).backgroundRead
}
