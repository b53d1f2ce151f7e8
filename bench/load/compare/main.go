// Command compare runs sluice load and vegeta attack side by side against
// the same server, at the same open-loop rate, and prints what each
// achieved and the CPU each driver process used per request (from the
// kernel's rusage of the child process), with medians over rounds and the
// sluice/vegeta ratio.
//
// Usage (see bench/load/run.sh, which builds everything):
//
//	compare -sluice BIN -vegeta BIN -url URL [-rate 20000] [-duration 10s] [-rounds 3]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/load"
)

type result struct {
	driver    string
	sent      int64
	ok        int64
	rate      float64 // achieved send rate, req/s
	cpu       time.Duration
	lagP99    float64 // sluice only, ms
	respP99   float64 // ms
	dropped   int64
	wallClock time.Duration
}

func (r result) cpuPerReq() float64 { return float64(r.cpu.Microseconds()) / float64(max(r.sent, 1)) }

func main() {
	sluiceBin := flag.String("sluice", "", "sluice binary")
	vegetaBin := flag.String("vegeta", "", "vegeta binary")
	url := flag.String("url", "http://127.0.0.1:18080/", "target")
	rate := flag.Int("rate", 20000, "requests per second")
	dur := flag.Duration("duration", 10*time.Second, "length of each run")
	rounds := flag.Int("rounds", 3, "rounds (the order alternates)")
	workers := flag.Int("workers", 0, "pin both drivers' worker pools (sluice --workers, vegeta -workers and -max-workers); 0: each driver's defaults")
	flag.Parse()
	if *sluiceBin == "" || *vegetaBin == "" {
		fmt.Fprintln(os.Stderr, "compare: -sluice and -vegeta are required")
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "compare")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average before: %s", b)
	}
	var sl, vg []result
	for i := range *rounds {
		runS := func() { sl = append(sl, runSluice(*sluiceBin, tmp, *url, *rate, *dur, *workers)) }
		runV := func() { vg = append(vg, runVegeta(*vegetaBin, tmp, *url, *rate, *dur, *workers)) }
		if i%2 == 0 {
			runS()
			runV()
		} else {
			runV()
			runS()
		}
		for _, r := range []result{sl[i], vg[i]} {
			fmt.Printf("round %d %-6s sent %8d ok %8d rate %9.1f/s (%.2f%% of target) dropped %d cpu %6.2fs = %5.1f µs/req resp p99 %.2f ms lag p99 %.3f ms\n",
				i, r.driver, r.sent, r.ok, r.rate, 100*r.rate/float64(*rate), r.dropped, r.cpu.Seconds(), r.cpuPerReq(), r.respP99, r.lagP99)
		}
	}
	ms, mv := median(sl, result.cpuPerReq), median(vg, result.cpuPerReq)
	fmt.Printf("\nmedian over %d rounds at %d req/s for %v:\n", *rounds, *rate, *dur)
	fmt.Printf("  sluice: rate %.1f/s (%.2f%% of target), lag p99 %.3f ms, %.1f µs CPU/req\n",
		median(sl, func(r result) float64 { return r.rate }), 100*median(sl, func(r result) float64 { return r.rate })/float64(*rate),
		median(sl, func(r result) float64 { return r.lagP99 }), ms)
	fmt.Printf("  vegeta: rate %.1f/s (%.2f%% of target), %.1f µs CPU/req\n",
		median(vg, func(r result) float64 { return r.rate }), 100*median(vg, func(r result) float64 { return r.rate })/float64(*rate), mv)
	fmt.Printf("  CPU per request, sluice/vegeta: %.2fx\n", ms/mv)
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func cpuOf(c *exec.Cmd) time.Duration {
	ru := c.ProcessState.SysUsage().(*syscall.Rusage)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runSluice(bin, tmp, url string, rate int, dur time.Duration, workers int) result {
	out := filepath.Join(tmp, "sluice.json")
	args := []string{"load", "--url", url, "--rate", strconv.Itoa(rate), "--duration", dur.String(), "--live", "off", "--out", out}
	if workers > 0 {
		args = append(args, "--workers", strconv.Itoa(workers))
	}
	c := exec.Command(bin, args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	start := time.Now()
	if err := c.Run(); err != nil && c.ProcessState == nil {
		fail(fmt.Errorf("sluice: %v: %s", err, stderr.String()))
	}
	wall := time.Since(start)
	r, err := load.ReadReport(out)
	if err != nil {
		fail(fmt.Errorf("sluice report: %v (%s)", err, stderr.String()))
	}
	w := r.Steps[0].Windows[0]
	return result{driver: "sluice", sent: w.Counts.Sent, ok: w.Counts.OK, rate: w.Rates.Sent, cpu: cpuOf(c),
		lagP99: w.Driver.ScheduleLag.P99, respP99: w.Latency.ResponseTime.P99, dropped: w.Counts.Dropped, wallClock: wall}
}

func runVegeta(bin, tmp, url string, rate int, dur time.Duration, workers int) result {
	bin1 := filepath.Join(tmp, "vegeta.bin")
	args := []string{"attack", "-rate", fmt.Sprintf("%d/1s", rate), "-duration", dur.String(), "-output", bin1}
	if workers > 0 {
		// Pinned to sluice's fixed pool; left alone, vegeta grows its
		// workers (and connections) when the server slows down.
		args = append(args, "-workers", strconv.Itoa(workers), "-max-workers", strconv.Itoa(workers))
	}
	c := exec.Command(bin, args...)
	c.Stdin = strings.NewReader("GET " + url + "\n")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	start := time.Now()
	if err := c.Run(); err != nil {
		fail(fmt.Errorf("vegeta attack: %v: %s", err, stderr.String()))
	}
	wall := time.Since(start)
	rep := exec.Command(bin, "report", "-type", "json", bin1)
	b, err := rep.Output()
	if err != nil {
		fail(fmt.Errorf("vegeta report: %v", err))
	}
	var v struct {
		Requests    int64              `json:"requests"`
		Rate        float64            `json:"rate"`
		StatusCodes map[string]int64   `json:"status_codes"`
		Latencies   map[string]float64 `json:"latencies"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		fail(err)
	}
	return result{driver: "vegeta", sent: v.Requests, ok: v.StatusCodes["200"], rate: v.Rate, cpu: cpuOf(c),
		respP99: v.Latencies["99th"] / 1e6, wallClock: wall}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(1)
}
