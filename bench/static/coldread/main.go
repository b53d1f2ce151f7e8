// Command coldread measures cold reads on a deliberately slow disk with
// package static: the disk is modelled as a device with a few parallel
// channels and a fixed service time per read (static.Config.FS is the
// hook), so reads beyond its parallelism queue inside the "disk". It runs
// the same load twice, with a tight gate (few slots, a short queue, a
// MaxWait) and with a gate so wide it admits everything, and prints the
// latency of admitted cold reads, the refusals, and the latency of cache
// hits measured at the same time.
//
//	cd bench && go run ./static/coldread
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice/static"
)

func main() {
	dur := flag.Duration("duration", 5*time.Second, "length of each run")
	service := flag.Duration("service", 5*time.Millisecond, "disk service time per read")
	channels := flag.Int("channels", 4, "reads the disk serves in parallel; more wait in its queue")
	coldLevels := flag.String("cold", "32,128", "closed-loop clients reading distinct cold files (comma-separated levels)")
	hotWorkers := flag.Int("hot", 4, "closed-loop clients reading one cached file")
	flag.Parse()

	fmt.Printf("slow disk: %d channels, %s per Read call (a cold file takes 2: data, then EOF); cold clients read distinct files and wait %s after a 503; %d hot clients read one cached file; %s per run\n\n",
		*channels, *service, backoff, *hotWorkers, *dur)
	fmt.Println("| gate | cold clients | admitted/s | admitted p50 | admitted p99 | admitted max | 503/s | 503 p99 | hot req/s | hot p50 | hot p99 | peak disk reads |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for level := range strings.SplitSeq(*coldLevels, ",") {
		var cold int
		if _, err := fmt.Sscan(level, &cold); err != nil || cold < 1 {
			fmt.Fprintf(os.Stderr, "coldread: bad -cold level %q\n", level)
			os.Exit(2)
		}
		for _, run := range []struct {
			name string
			cfg  static.Config
		}{
			{"work-limit 4, queue 16, max-wait 50ms", static.Config{WorkLimit: 4, Queue: 16, MaxWait: 50 * time.Millisecond}},
			{"work-limit 4096 (admits everything)", static.Config{WorkLimit: 4096}},
		} {
			r := measure(run.cfg, *dur, *service, *channels, cold, *hotWorkers)
			secs := dur.Seconds()
			fmt.Printf("| %s | %d | %.0f | %s | %s | %s | %.0f | %s | %.0f | %s | %s | %d |\n", run.name, cold,
				float64(len(r.cold))/secs, pct(r.cold, 50), pct(r.cold, 99), pct(r.cold, 100),
				float64(len(r.refused))/secs, pct(r.refused, 99),
				float64(len(r.hot))/secs, pct(r.hot, 50), pct(r.hot, 99), r.peak)
		}
	}
}

// backoff is how long a cold client waits after a 503 before its next
// request (a stand-in for Retry-After, which is whole seconds).
const backoff = 100 * time.Millisecond

type result struct {
	cold, hot, refused []time.Duration
	peak               int64
}

func measure(cfg static.Config, dur, service time.Duration, channels, coldWorkers, hotWorkers int) result {
	files := fstest.MapFS{"hot.html": {Data: []byte(strings.Repeat("<p>hot</p>\n", 100)), ModTime: time.Unix(1e9, 0)}}
	const nCold = 200_000 // never read twice: every cold request reads the disk
	for i := range nCold {
		files[fmt.Sprintf("c/%d.bin", i)] = &fstest.MapFile{Data: []byte(strings.Repeat("x", 4096)), ModTime: time.Unix(1e9, 0)}
	}
	cfg.FS = &slowDisk{FS: files, service: service, channels: make(chan struct{}, channels)}
	h, err := static.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: coldWorkers + hotWorkers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func(path string) (int, time.Duration) {
		start := time.Now()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			return 0, time.Since(start)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	get("/hot.html") // into the cache

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var next atomic.Int64
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	for range coldWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				code, d := get(fmt.Sprintf("/c/%d.bin", next.Add(1)%nCold))
				mu.Lock()
				switch code {
				case http.StatusOK:
					res.cold = append(res.cold, d)
				case http.StatusServiceUnavailable:
					res.refused = append(res.refused, d)
				}
				mu.Unlock()
				if code == http.StatusServiceUnavailable {
					time.Sleep(backoff)
				}
			}
		})
	}
	for range hotWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if code, d := get("/hot.html"); code == http.StatusOK {
					mu.Lock()
					res.hot = append(res.hot, d)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.peak = h.Gate().Stats().PeakInUse
	return res
}

// slowDisk serves reads through a fixed number of channels, each read
// taking the service time: the disk's own queue grows with concurrency.
type slowDisk struct {
	fs.FS
	service  time.Duration
	channels chan struct{}
}

func (d *slowDisk) Stat(name string) (fs.FileInfo, error) { return fs.Stat(d.FS, name) }

func (d *slowDisk) Open(name string) (fs.File, error) {
	f, err := d.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &slowFile{File: f, disk: d}, nil
}

type slowFile struct {
	fs.File
	disk *slowDisk
}

func (f *slowFile) Read(p []byte) (int, error) {
	f.disk.channels <- struct{}{}
	time.Sleep(f.disk.service)
	<-f.disk.channels
	return f.File.Read(p)
}

func (f *slowFile) Seek(off int64, whence int) (int64, error) {
	return f.File.(io.Seeker).Seek(off, whence)
}

func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, len(s)*p/100)
	return s[i].Round(10 * time.Microsecond).String()
}
