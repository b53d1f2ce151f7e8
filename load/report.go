package load

import (
	"time"
)

// SchemaV1 names the report format; the JSON Schema is schema/load-report-v1.json.
const SchemaV1 = "sluice/load-report/v1"

// Report is everything one run (or a merge of runs) measured. It is the
// JSON document `sluice load` writes; see docs/load.md for each field.
type Report struct {
	Schema       string      `json:"schema"`
	Kind         string      `json:"kind"` // "load", "sweep" or "merge"
	Tool         Tool        `json:"tool"`
	BinarySHA256 string      `json:"binary_sha256"`
	Host         Host        `json:"host"`
	Command      []string    `json:"command"`
	Started      time.Time   `json:"started"`
	Finished     time.Time   `json:"finished"`
	Interrupted  bool        `json:"interrupted"`
	Aborted      string      `json:"aborted,omitempty"` // why the run stopped early, if it did
	Profile      *ProfileRef `json:"profile,omitempty"`
	Steps        []Step      `json:"steps"`
	Verdict      Verdict     `json:"verdict"`
	Sources      []Source    `json:"sources,omitempty"` // the reports a merge combined
	// SourceFiles are the hashes of the source files that define the gates
	// and the driver, as the binary recorded them.
	SourceFiles []SourceFile `json:"source_files"`
	// ReleaseQualified says the report names exactly what produced it (see
	// ReleaseReasons); ReleaseReasons says why not.
	ReleaseQualified bool     `json:"release_qualified"`
	ReleaseReasons   []string `json:"release_reasons"`
}

// Tool identifies the binary that wrote a report.
type Tool struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Dirty    bool   `json:"dirty"`
	Go       string `json:"go"`
}

// Host describes the driver machine.
type Host struct {
	Hostname   string `json:"hostname"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// ProfileRef is the profile a run was judged against, embedded whole.
type ProfileRef struct {
	Path    string  `json:"path"`
	SHA256  string  `json:"sha256"`
	Case    string  `json:"case"`
	Profile Profile `json:"profile"`
}

// Source is one input of a merged report.
type Source struct {
	File    string    `json:"file"`
	SHA256  string    `json:"sha256"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

// Step is one load level: the whole run for `sluice load`, one rung of the
// ladder for `sluice sweep`.
type Step struct {
	Label     string    `json:"label"`
	Mode      string    `json:"mode"`              // "open" or "closed"
	Rate      float64   `json:"rate,omitempty"`    // open loop: start rate, req/s
	RampTo    float64   `json:"ramp_to,omitempty"` // open loop: linear ramp end rate
	StepRates []float64 `json:"step_rates,omitempty"`
	// Arrivals is the open loop's arrival process, "uniform" or
	// "poisson" ("mixed" in a merge of both); Seed is the Poisson
	// generator's seed (absent for uniform arrivals and in merges).
	Arrivals    Arrivals `json:"arrivals,omitempty"`
	Seed        uint64   `json:"seed,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"` // closed loop
	Workers     int      `json:"workers"`
	QueueDepth  int      `json:"queue_depth,omitempty"` // open loop
	Settings    Settings `json:"settings"`
	Windows     []Window `json:"windows"`
}

// Settings are the request and timing parameters of a step.
type Settings struct {
	Targets       []TargetInfo `json:"targets"`
	Pick          string       `json:"pick"`
	HTTP2         bool         `json:"http2"`
	KeepAlive     bool         `json:"keep_alive"`
	DurationS     float64      `json:"duration_s"`
	Windows       int          `json:"windows"`
	TimeoutS      float64      `json:"timeout_s"`
	DrainTimeoutS float64      `json:"drain_timeout_s"`
	P99BudgetMS   float64      `json:"p99_budget_ms"`
	MaxLagMS      float64      `json:"max_lag_ms"`
	MaxCPU        float64      `json:"max_cpu"`
	MetricsURL    string       `json:"metrics_url,omitempty"`
}

// TargetInfo is a target as the report records it: the body by size and
// hash, not content.
type TargetInfo struct {
	Method     string              `json:"method"`
	URL        string              `json:"url"`
	Headers    map[string][]string `json:"headers,omitempty"`
	BodyBytes  int                 `json:"body_bytes"`
	BodySHA256 string              `json:"body_sha256,omitempty"`
	Weight     int                 `json:"weight"`
}

// Window is one judged stretch of load. Arrivals scheduled in it are
// counted in it, even when they finish during the drain that follows.
type Window struct {
	Index     int       `json:"index"`
	Started   time.Time `json:"started"`
	DurationS float64   `json:"duration_s"` // the scheduled length
	ElapsedS  float64   `json:"elapsed_s"`  // until the last request of the window finished
	Counts    Counts    `json:"counts"`
	Rates     Rates     `json:"rates"`
	Latency   Latency   `json:"latency"`
	Driver    Driver    `json:"driver"`
	Metrics   *Metrics  `json:"metrics,omitempty"`
	Timeline  []Second  `json:"timeline"`
	// Phases are the steps of a stepped or ramped window, each its own row;
	// absent for a constant rate or a closed loop.
	Phases []Phase `json:"phases,omitempty"`
}

// Counts are the outcome classes. They reconcile exactly:
// Scheduled = Sent + Dropped and
// Sent = OK + Refused + HTTPError + TransportError + Unfinished.
type Counts struct {
	Scheduled       int64            `json:"scheduled"`
	Sent            int64            `json:"sent"`
	Dropped         int64            `json:"dropped"`
	DropReasons     map[string]int64 `json:"drop_reasons"`
	OK              int64            `json:"ok"`
	Refused         int64            `json:"refused"`
	HTTPError       int64            `json:"http_error"`
	TransportError  int64            `json:"transport_error"`
	TransportErrors map[string]int64 `json:"transport_errors"`
	Unfinished      int64            `json:"unfinished"`
	Status          map[string]int64 `json:"status"`
	Refusals        []Refusal        `json:"refusals"`
}

// Drop reasons.
const (
	DropQueueFull = "queue_full" // the bounded arrival queue was full
	DropCanceled  = "canceled"   // still queued when the run was interrupted or aborted
)

// Refusal counts HTTP refusals (503, 429) by the gate and reason the body
// named; both are empty when the body was not a sluice envelope.
type Refusal struct {
	Status int    `json:"status"`
	Gate   string `json:"gate"`
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// Rates are counts over the window's scheduled duration, per second.
type Rates struct {
	Offered float64 `json:"offered"`
	Sent    float64 `json:"sent"`
	OK      float64 `json:"ok"`
}

// Latency holds the window's distributions. ScheduleWait is sent − scheduled,
// RequestTime done − sent, ResponseTime done − scheduled (free of
// coordinated omission), FirstByte first byte − sent. All four cover
// requests that got an HTTP response (ok, refused, http_error).
type Latency struct {
	ScheduleWait Dist `json:"schedule_wait"`
	RequestTime  Dist `json:"request_time"`
	ResponseTime Dist `json:"response_time"`
	FirstByte    Dist `json:"first_byte"`
	// OKResponseTime is ResponseTime for ok answers only: a refusal is
	// usually fast and would flatter the percentiles.
	OKResponseTime Dist `json:"ok_response_time"`
}

// Dist summarises a histogram in milliseconds. Hist is the exact
// HdrHistogram (microseconds, V2 compressed, base64), so reports merge exactly.
type Dist struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Hist  string  `json:"hist"`
}

// Driver is the driver's own health in a window.
type Driver struct {
	ScheduleLag    Dist     `json:"schedule_lag"` // pacer hand-off − scheduled
	CPUSeconds     float64  `json:"cpu_seconds"`
	CPUUtilization float64  `json:"cpu_utilization"` // CPU seconds / (elapsed × GOMAXPROCS)
	Limited        bool     `json:"limited"`
	Reasons        []string `json:"reasons"`
}

// Metrics is what a Prometheus scrape before and after the window showed.
type Metrics struct {
	URL           string      `json:"url"`
	Error         string      `json:"error,omitempty"`
	Rejections    []Rejection `json:"rejections"`
	RejectedTotal float64     `json:"rejected_total"`
	Attributed    int64       `json:"attributed"`
	Unattributed  int64       `json:"unattributed"`
	// ServerCPUSeconds and ServerCPUPerOKMillis are absent when the
	// endpoint does not export process_cpu_seconds_total.
	ServerCPUSeconds     *float64 `json:"server_cpu_seconds,omitempty"`
	ServerCPUPerOKMillis *float64 `json:"server_cpu_per_ok_ms,omitempty"`
	// Gates are each admission gate's books over the window; BooksClosed
	// is false when any gate's do not close.
	Gates       []GateBalance `json:"gates"`
	BooksClosed bool          `json:"books_closed"`
}

// GateBalance is one gate's books over a window, from the scrapes before
// and after it (after the drain): every slot taken must have been given
// back. Counter figures are increases over the window; gauges are read
// after it (nil when the server does not export them).
type GateBalance struct {
	Gate        string   `json:"gate"`
	Admitted    float64  `json:"admitted"`
	Completed   float64  `json:"completed"`
	Inflight    *float64 `json:"inflight_after,omitempty"`
	Waiting     *float64 `json:"waiting_after,omitempty"`
	Capacity    *float64 `json:"capacity,omitempty"`
	HoldSeconds float64  `json:"hold_seconds"`
	// Occupancy is HoldSeconds over the window's elapsed time: the mean
	// number of slots in use.
	Occupancy float64  `json:"occupancy"`
	Closed    bool     `json:"closed"`
	Problems  []string `json:"problems"`
}

// Rejection is the increase of sluice_admission_rejected_total for one
// gate, kind and reason over the window. Connection-level refusals
// (sluice_connections_rejected_total{reason}) are booked under the gate
// "connections" with no kind.
type Rejection struct {
	Gate   string  `json:"gate"`
	Kind   string  `json:"kind"`
	Reason string  `json:"reason"`
	Delta  float64 `json:"delta"`
}

// Second is one second of a window's timeline, by scheduled time: the
// arrivals due in that second, what became of them, and the response times
// they saw. The percentiles come from coarse per-second histograms (within
// about 5%; the window's own percentiles are exact) and are 0 when nothing
// was answered. In a merged report they are the highest of the drivers'.
type Second struct {
	Scheduled int64 `json:"scheduled"`
	Dropped   int64 `json:"dropped"`
	OK        int64 `json:"ok"`
	Refused   int64 `json:"refused"`
	Errors    int64 `json:"errors"`
	// ResponseP50 and ResponseP99 are of every answer (ok, refused,
	// http_error); OKResponseP99 of ok answers only; LagP99 is the pacer's
	// schedule lag (open loop). All in milliseconds.
	ResponseP50   float64 `json:"resp_p50_ms"`
	ResponseP99   float64 `json:"resp_p99_ms"`
	OKResponseP99 float64 `json:"ok_resp_p99_ms"`
	LagP99        float64 `json:"lag_p99_ms"`
}

// Phase is one step of a stepped window, or a tenth of a ramped one,
// reported as its own row: the arrivals scheduled in [StartS, EndS) of the
// window and what became of them. Its histograms keep two significant
// digits.
type Phase struct {
	StartS         float64     `json:"start_s"`
	EndS           float64     `json:"end_s"`
	RateFrom       float64     `json:"rate_from"` // scheduled rate at the start, req/s
	RateTo         float64     `json:"rate_to"`   // and at the end
	Counts         PhaseCounts `json:"counts"`
	Rates          Rates       `json:"rates"` // over EndS − StartS
	ResponseTime   Dist        `json:"response_time"`
	OKResponseTime Dist        `json:"ok_response_time"`
}

// PhaseCounts are a phase's outcome classes; Errors is http_error +
// transport_error + unfinished.
type PhaseCounts struct {
	Scheduled int64 `json:"scheduled"`
	Sent      int64 `json:"sent"`
	Dropped   int64 `json:"dropped"`
	OK        int64 `json:"ok"`
	Refused   int64 `json:"refused"`
	Errors    int64 `json:"errors"`
}

// Verdict is the judgement of a report against a profile case.
type Verdict struct {
	Status  string          `json:"status"` // PASS, FAIL, INVALID or NONE (no profile)
	Case    string          `json:"case,omitempty"`
	Reasons []string        `json:"reasons"`
	Windows []WindowVerdict `json:"windows"`
}

// WindowVerdict is one window's judgement.
type WindowVerdict struct {
	Step    int      `json:"step"`
	Window  int      `json:"window"`
	Status  string   `json:"status"`
	Reasons []string `json:"reasons"`
}

// Verdict statuses.
const (
	StatusPass    = "PASS"
	StatusFail    = "FAIL"
	StatusInvalid = "INVALID"
	StatusNone    = "NONE"
)
