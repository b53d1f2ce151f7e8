package promsluice

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/internal/metricname"
)

// ConnStatsSource is what ConnMetrics reads at scrape time;
// *connlimit.Listener implements it.
type ConnStatsSource interface {
	Stats() connlimit.Stats
}

// ConnMetrics exports a connection-limited listener's counters, read from
// its Stats snapshot at scrape time, so exporting costs nothing between
// scrapes. It is a prometheus.Collector. The zero value is not usable;
// call NewConnMetrics. Safe for concurrent use.
//
// Metrics (labels are closed sets: reason = connlimit.Reason*, kind =
// connlimit.AcceptErr*; every value is exported, zero included):
//
//	sluice_connections_open                        gauge
//	sluice_connections_max                         gauge
//	sluice_connections_refusing                    gauge
//	sluice_connections_accepted_total              counter
//	sluice_connections_rejected_total{reason}      counter
//	sluice_connections_busy_write_errors_total     counter
//	sluice_connections_closed_idle_total           counter
//	sluice_connections_closed_header_timeout_total counter
//	sluice_accept_errors_total{kind}               counter
//	sluice_accept_backoffs_total                   counter
type ConnMetrics struct {
	src ConnStatsSource

	open, max, refusing                                     *prometheus.Desc
	accepted, rejected, busyWriteErrors                     *prometheus.Desc
	closedIdle, closedHeaderTimeout, acceptErrors, backoffs *prometheus.Desc
}

// NewConnMetrics returns a collector for src (typically the
// *connlimit.Listener the server accepts on).
func NewConnMetrics(src ConnStatsSource) *ConnMetrics {
	return &ConnMetrics{
		src:                 src,
		open:                prometheus.NewDesc(metricname.ConnectionsOpen, "Accepted connections not yet closed.", nil, nil),
		max:                 prometheus.NewDesc(metricname.ConnectionsMax, "Most connections open at once before new ones are refused.", nil, nil),
		refusing:            prometheus.NewDesc(metricname.ConnectionsRefusing, "Refused connections still being answered and closed.", nil, nil),
		accepted:            prometheus.NewDesc(metricname.ConnectionsAccepted, "Connections accepted under the limit.", nil, nil),
		rejected:            prometheus.NewDesc(metricname.ConnectionsRejected, "Connections rejected with a busy reply, by reason.", []string{"reason"}, nil),
		busyWriteErrors:     prometheus.NewDesc(metricname.ConnectionsBusyWriteErrors, "Rejected connections whose busy reply could not be written.", nil, nil),
		closedIdle:          prometheus.NewDesc(metricname.ConnectionsClosedIdle, "Keep-alive connections closed after sitting idle past the idle timeout.", nil, nil),
		closedHeaderTimeout: prometheus.NewDesc(metricname.ConnectionsClosedHeaderTimeout, "Connections closed because request headers did not arrive within the header timeout.", nil, nil),
		acceptErrors:        prometheus.NewDesc(metricname.AcceptErrors, "Temporary accept errors (out of file descriptors, memory), by kind.", []string{"kind"}, nil),
		backoffs:            prometheus.NewDesc(metricname.AcceptBackoffs, "Pauses taken by the accept loop after a temporary error.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *ConnMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		m.open, m.max, m.refusing, m.accepted, m.rejected, m.busyWriteErrors,
		m.closedIdle, m.closedHeaderTimeout, m.acceptErrors, m.backoffs,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *ConnMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.src.Stats()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(m.open, s.Open)
	gauge(m.max, s.MaxConns)
	gauge(m.refusing, s.Refusing)
	counter(m.accepted, s.Accepted)
	for reason, n := range s.Rejected {
		counter(m.rejected, n, reason)
	}
	counter(m.busyWriteErrors, s.BusyWriteErrors)
	counter(m.closedIdle, s.ClosedIdle)
	counter(m.closedHeaderTimeout, s.ClosedHeaderTimeout)
	for kind, n := range s.AcceptErrors {
		counter(m.acceptErrors, n, kind)
	}
	counter(m.backoffs, s.Backoffs)
}

var _ prometheus.Collector = (*ConnMetrics)(nil)
