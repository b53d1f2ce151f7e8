package load

import (
	"fmt"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms record microseconds from 1 µs to 10 minutes with three
// significant digits: about 170 KB each, whatever the request count.
const (
	histLowest  = 1
	histHighest = int64(10 * time.Minute / time.Microsecond)
	histDigits  = 3
)

// hdrHist keeps the import in one file.
type hdrHist = hdr.Histogram

func newHist() *hdr.Histogram { return hdr.New(histLowest, histHighest, histDigits) }

// newPhaseHist is the smaller histogram of a phase row: two significant
// digits, about 24 KB.
func newPhaseHist() *hdr.Histogram { return hdr.New(histLowest, histHighest, 2) }

// record adds d, clamped into the trackable range.
func record(h *hdr.Histogram, d time.Duration) {
	us := int64(d / time.Microsecond)
	if us < histLowest {
		us = histLowest
	}
	if us > histHighest {
		us = histHighest
	}
	_ = h.RecordValue(us) // cannot fail: the value is in range
}

func ms(us int64) float64 { return float64(us) / 1000 }

// distOf summarises h and embeds its exact encoding.
func distOf(h *hdr.Histogram) Dist {
	d := Dist{Count: h.TotalCount()}
	if d.Count > 0 {
		d.Min = ms(h.Min())
		d.Mean = h.Mean() / 1000
		d.P50 = ms(h.ValueAtQuantile(50))
		d.P90 = ms(h.ValueAtQuantile(90))
		d.P99 = ms(h.ValueAtQuantile(99))
		d.P999 = ms(h.ValueAtQuantile(99.9))
		d.Max = ms(h.Max())
	}
	b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err == nil {
		d.Hist = string(b)
	}
	return d
}

// histOf decodes a Dist's embedded histogram.
func histOf(d Dist) (*hdr.Histogram, error) {
	if d.Hist == "" {
		return nil, fmt.Errorf("histogram missing")
	}
	h, err := hdr.Decode([]byte(d.Hist))
	if err != nil {
		return nil, fmt.Errorf("histogram: %v", err)
	}
	if h.TotalCount() != d.Count {
		return nil, fmt.Errorf("histogram holds %d values, count says %d", h.TotalCount(), d.Count)
	}
	return h, nil
}

// mergeDists merges distributions exactly through their histograms.
func mergeDists(ds ...Dist) (Dist, error) {
	out := newHist()
	for _, d := range ds {
		h, err := histOf(d)
		if err != nil {
			return Dist{}, err
		}
		if dropped := out.Merge(h); dropped != 0 {
			return Dist{}, fmt.Errorf("histogram merge dropped %d values", dropped)
		}
	}
	return distOf(out), nil
}
