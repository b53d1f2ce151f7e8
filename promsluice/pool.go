package promsluice

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/pool"
)

// poolReasons are the refusal reasons a pool can give; only these are
// exported, so the rejected series stay few.
var poolReasons = []admit.Reason{admit.ReasonQueueFull, admit.ReasonClosed, admit.ReasonCanceled, admit.ReasonDeadline}

// poolMetrics is the part of Metrics that exports pool.Pool executors
// (Metrics.Add of a pool): counters and gauges read from Pool.Stats at
// scrape time, so they cannot drift from the pool's own counts, and the
// queue-wait and run-time histograms of pools whose pool.Config.Observer
// is the Metrics. Safe for concurrent use.
//
// Metrics (labels are closed sets: reason = queue_full, closed, canceled,
// deadline; outcome = admit's outcomes; drop = pool.DropReason):
//
//	sluice_pool_offered_total{pool}                 counter
//	sluice_pool_admitted_total{pool}                counter
//	sluice_pool_rejected_total{pool,reason}         counter
//	sluice_pool_completed_total{pool,outcome}       counter
//	sluice_pool_dropped_total{pool,drop}            counter
//	sluice_pool_caller_runs_total{pool}             counter
//	sluice_pool_workers{pool}                       gauge
//	sluice_pool_workers_max{pool}                   gauge
//	sluice_pool_running{pool}                       gauge
//	sluice_pool_queued{pool}                        gauge
//	sluice_pool_queue_capacity{pool}                gauge (-1: unbounded)
//	sluice_pool_oldest_queued_seconds{pool}         gauge
//	sluice_pool_queue_wait_seconds{pool}            histogram
//	sluice_pool_run_seconds{pool}                   histogram
type poolMetrics struct {
	wait *prometheus.HistogramVec
	run  *prometheus.HistogramVec

	mu    sync.Mutex
	pools []*pool.Pool

	offered, admitted, rejected, completed, dropped, callerRuns *prometheus.Desc
	workers, maxWorkers, running, queued, queueCap, oldest      *prometheus.Desc
}

// newPoolMetrics returns an empty poolMetrics.
func newPoolMetrics() *poolMetrics {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"pool"}, labels...), nil)
	}
	return &poolMetrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricname.PoolQueueWait,
			Help:    "Time tasks spent queued before a worker took them (tasks handed over at once are not sampled).",
			Buckets: DefaultLatencyBuckets,
		}, []string{"pool"}),
		run: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricname.PoolRun,
			Help:    "Time tasks ran (dropped tasks are not sampled).",
			Buckets: DefaultLatencyBuckets,
		}, []string{"pool"}),
		offered:    desc(metricname.PoolOffered, "Tasks submitted to the pool."),
		admitted:   desc(metricname.PoolAdmitted, "Tasks accepted: started, queued or run by the caller."),
		rejected:   desc(metricname.PoolRejected, "Tasks rejected, by reason (tasks dropped by Discard count as queue_full).", "reason"),
		completed:  desc(metricname.PoolCompleted, "Accepted tasks that ended, by outcome (dropped: never ran).", "outcome"),
		dropped:    desc(metricname.PoolDropped, "Tasks that never ran, by why: discarded, evicted, expired, closed.", "drop"),
		callerRuns: desc(metricname.PoolCallerRuns, "Tasks run on the submitting goroutine (WhenFull CallerRuns)."),
		workers:    desc(metricname.PoolWorkers, "Worker goroutines alive."),
		maxWorkers: desc(metricname.PoolWorkersMax, "Most workers the pool may have."),
		running:    desc(metricname.PoolRunning, "Tasks running now, on workers or callers."),
		queued:     desc(metricname.PoolQueued, "Accepted tasks waiting for a worker."),
		queueCap:   desc(metricname.PoolQueueCapacity, "Tasks the queue may hold (-1: unbounded)."),
		oldest:     desc(metricname.PoolOldestQueued, "How long the task at the head of the queue has waited."),
	}
}

// add exports p's counters. Adding the same pool twice is a no-op.
func (m *poolMetrics) add(p *pool.Pool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.pools {
		if have == p {
			return
		}
	}
	m.pools = append(m.pools, p)
}

// ObserveSubmit does nothing: submissions are counted from Stats.
func (m *poolMetrics) ObserveSubmit(pool.SubmitEvent) {}

// ObserveDone records how long a task waited in the queue and ran.
func (m *poolMetrics) ObserveDone(e pool.DoneEvent) {
	if e.Wait > 0 {
		m.wait.WithLabelValues(e.Pool).Observe(e.Wait.Seconds())
	}
	if e.Outcome != admit.OutcomeDropped && e.Run > 0 {
		m.run.WithLabelValues(e.Pool).Observe(e.Run.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (m *poolMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		m.offered, m.admitted, m.rejected, m.completed, m.dropped, m.callerRuns,
		m.workers, m.maxWorkers, m.running, m.queued, m.queueCap, m.oldest,
	} {
		ch <- d
	}
	m.wait.Describe(ch)
	m.run.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *poolMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	pools := append([]*pool.Pool(nil), m.pools...)
	m.mu.Unlock()
	for _, p := range pools {
		s := p.Stats()
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{s.Pool}, labels...)...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.Pool)
		}
		counter(m.offered, s.Offered)
		counter(m.admitted, s.Admitted)
		for _, r := range poolReasons {
			counter(m.rejected, s.Rejected[r], r.String())
		}
		for o := admit.OutcomeOK; int(o) < admit.NumOutcomes; o++ {
			counter(m.completed, s.Completed[o], o.String())
		}
		for d := pool.DropNone + 1; int(d) < pool.NumDropReasons; d++ {
			counter(m.dropped, s.Dropped[d], d.String())
		}
		counter(m.callerRuns, s.CallerRuns)
		gauge(m.workers, float64(s.Workers))
		gauge(m.maxWorkers, float64(s.Max))
		gauge(m.running, float64(s.Running))
		gauge(m.queued, float64(s.Queued))
		gauge(m.queueCap, float64(s.QueueCap))
		gauge(m.oldest, s.OldestQueued.Seconds())
	}
	m.wait.Collect(ch)
	m.run.Collect(ch)
}

var (
	_ prometheus.Collector = (*poolMetrics)(nil)
	_ pool.Observer        = (*poolMetrics)(nil)
)
