package load

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/internal/atomicfile"
)

// ErrBadReport reports a file that is not a valid v1 report.
var ErrBadReport = errors.New("load: bad report")

// DefaultReportName is the file name used when --out is not given.
func DefaultReportName(t time.Time) string {
	return "load-report-" + t.UTC().Format("20060102T150405Z") + ".json"
}

// marshalReport encodes r as indented JSON.
func marshalReport(r *Report) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteReport writes r to path atomically.
func WriteReport(path string, r *Report) error {
	b, err := marshalReport(r)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b)
}

// ParseReport decodes and validates a report (see Validate). Unknown fields
// are errors: a report is a record, and a typo in a hand-edited one should
// not pass silently.
func ParseReport(data []byte) (*Report, error) {
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReport, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the report", ErrBadReport)
	}
	if err := Validate(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ReadReport reads and parses the report at path. A file larger than
// MaxReportBytes is refused before it is read: decoding a report costs
// several times its size in memory.
func ReadReport(path string) (*Report, error) {
	r, _, err := ReadReportSHA256(path)
	return r, err
}

// ReadReportSHA256 is ReadReport that also returns the SHA-256 of the
// file's bytes, hex-encoded (a merge records its inputs by it).
func ReadReportSHA256(path string) (*Report, string, error) {
	b, err := readBounded(path, MaxReportBytes)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrBadReport, err)
	}
	r, err := ParseReport(b)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(b)
	return r, hex.EncodeToString(sum[:]), nil
}

// ReadInput reads a file the driver takes as input (a request body, a
// targets file) of at most max bytes (MaxBodyBytes, MaxTargetsFileBytes).
// A larger one is refused from its size before it is read, and a file
// that grows while it is read stops at max+1 bytes.
func ReadInput(path string, max int64) ([]byte, error) { return readBounded(path, max) }

// readBounded is ReadInput; reports and profiles are read through it too.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, over the bound: at most %d", path, st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over the bound: at most %d bytes", path, max)
	}
	return b, nil
}

// ErrOutPath reports a report path that cannot be written: its folder is
// missing or it names a folder.
var ErrOutPath = errors.New("load: cannot write the report there")

// CheckReportPath says whether a report can be written at path, before any
// load is sent: its folder must exist and path itself must not be a
// folder (a run that ends unable to write its report has measured for
// nothing).
func CheckReportPath(path string) error {
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: %s: folder %s does not exist", ErrOutPath, path, filepath.Dir(path))
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%w: %s is a folder; give a file name (e.g. %s)", ErrOutPath, path, filepath.Join(path, "run.json"))
	}
	return nil
}

// Validate checks what the JSON schema cannot: the outcome classes
// reconcile, and every stored summary a verdict reads (latency percentiles,
// rates, timeline totals, driver CPU use, attribution) equals its
// recomputation from the histograms and counts. The error names the first
// field that disagrees.
func Validate(r *Report) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadReport}, a...)...)
	}
	if r.Schema != SchemaV1 {
		return bad("schema %q, want %q", r.Schema, SchemaV1)
	}
	switch r.Kind {
	case "load", "sweep", "merge":
	default:
		return bad("kind %q", r.Kind)
	}
	switch r.Verdict.Status {
	case StatusPass, StatusFail, StatusInvalid, StatusNone:
	default:
		return bad("verdict %q", r.Verdict.Status)
	}
	if r.Steps == nil {
		return bad("no steps")
	}
	if _, err := StoredCase(r); err != nil {
		return bad("profile: the report names case %q, which its own profile does not have", r.Profile.Case)
	}
	if r.ReleaseQualified && r.Kind != "merge" {
		if why := ReleaseReasons(r); len(why) > 0 {
			return bad("release_qualified is true but %s", why[0])
		}
	}
	for si, st := range r.Steps {
		if st.Mode != "open" && st.Mode != "closed" {
			return bad("step %d: mode %q", si, st.Mode)
		}
		for wi, w := range st.Windows {
			where := fmt.Sprintf("step %d window %d", si, wi)
			c := w.Counts
			if err := c.Reconcile(); err != nil {
				return bad("%s: %v", where, err)
			}
			if err := verifyWindow(w, r.Host, r.Kind); err != nil {
				return bad("%s: %v", where, err)
			}
		}
	}
	return nil
}

// Reconcile checks the two identities of the outcome classes and their
// breakdowns.
func (c Counts) Reconcile() error {
	if c.Scheduled != c.Sent+c.Dropped {
		return fmt.Errorf("scheduled %d != sent %d + dropped %d", c.Scheduled, c.Sent, c.Dropped)
	}
	if sum := c.OK + c.Refused + c.HTTPError + c.TransportError + c.Unfinished; c.Sent != sum {
		return fmt.Errorf("sent %d != ok+refused+http_error+transport_error+unfinished %d", c.Sent, sum)
	}
	if c.OK < 0 || c.Refused < 0 || c.HTTPError < 0 || c.TransportError < 0 || c.Unfinished < 0 || c.Dropped < 0 {
		return fmt.Errorf("negative count")
	}
	var d, t, rf int64
	for _, v := range c.DropReasons {
		d += v
	}
	for _, v := range c.TransportErrors {
		t += v
	}
	for _, r := range c.Refusals {
		rf += r.Count
	}
	if d != c.Dropped {
		return fmt.Errorf("drop reasons add to %d, dropped %d", d, c.Dropped)
	}
	if t != c.TransportError {
		return fmt.Errorf("transport error kinds add to %d, transport_error %d", t, c.TransportError)
	}
	if rf != c.Refused {
		return fmt.Errorf("refusals add to %d, refused %d", rf, c.Refused)
	}
	return nil
}
