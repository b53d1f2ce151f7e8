package server_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/server"
)

// h2cTransport speaks cleartext HTTP/2 with prior knowledge. With strict
// set it keeps to one connection and honours the server's stream limit
// instead of opening more connections.
func h2cTransport(strict bool) *http.Transport {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: p, HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: strict}}
}

// TestH2CServesPriorKnowledge: with H2C the main listener speaks
// cleartext HTTP/2 to a client with prior knowledge, and HTTP/1.1 still.
func TestH2CServesPriorKnowledge(t *testing.T) {
	f := start(t, admit.Config{Capacity: 4}, func(c *server.Config) { c.H2C = true })
	tr := h2cTransport(false)
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(f.base + "/cheap")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Proto != "HTTP/2.0" || string(b) != "cheap" {
		t.Errorf("h2c: %s %q", resp.Proto, b)
	}
	if r := f.mustGet(t, f.base+"/cheap"); r.status != 200 {
		t.Errorf("HTTP/1.1 beside h2c: %d", r.status)
	}
}

// TestStreamBoundKeepsOneConnectionFromTakingEverySlot: one HTTP/2
// connection may have MaxConcurrentStreams streams open. The server
// advertises the bound, and a client that opens four streams on one
// connection anyway gets two of a gate's four slots: the others are
// refused as streams, and a second connection gets the remaining slots.
// A raw framer stands in for the client so that no client-side queueing
// (or a client that has not yet read the server's SETTINGS) blurs it.
func TestStreamBoundKeepsOneConnectionFromTakingEverySlot(t *testing.T) {
	f := start(t, admit.Config{Capacity: 4}, func(c *server.Config) {
		c.H2C = true
		c.MaxConcurrentStreams = 2
	})
	addr := strings.TrimPrefix(f.base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server's first frame is its SETTINGS, with the bound.
	frame, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	settings, ok := frame.(*http2.SettingsFrame)
	if !ok || settings.IsAck() {
		t.Fatalf("first frame %v, want the server's SETTINGS", frame)
	}
	if v, ok := settings.Value(http2.SettingMaxConcurrentStreams); !ok || v != 2 {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (sent %v), want 2", v, ok)
	}
	if err := fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for i := range 4 {
		hbuf.Reset()
		for _, hf := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: addr}, {Name: ":path", Value: "/work"}} {
			_ = enc.WriteField(hf)
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Two streams enter the handler; the other two are reset by the server.
	resets := 0
	for resets < 2 {
		frame, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's answer to four streams: %v (after %d resets)", err, resets)
		}
		if rst, ok := frame.(*http2.RSTStreamFrame); ok {
			if rst.StreamID < 5 {
				t.Fatalf("stream %d reset (%v), want the two beyond the bound", rst.StreamID, rst.ErrCode)
			}
			resets++
		}
	}
	for range 2 {
		<-f.entered
	}
	if in := f.gate.Stats().Inflight; in != 2 {
		t.Errorf("one connection holds %d slots, want 2 (its stream limit)", in)
	}
	// A second connection gets the two slots the first could not take.
	second := h2cTransport(false)
	defer second.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if resp, err := (&http.Client{Transport: second}).Get(f.base + "/work"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	for range 2 {
		<-f.entered
	}
	if in := f.gate.Stats().Inflight; in != 4 {
		t.Errorf("two connections hold %d slots, want 4", in)
	}
	close(f.finish)
	wg.Wait()
	eventually(t, "the four admitted requests to end", func() bool { return f.gate.Stats().Completed.Total() == 4 })
	if st := f.gate.Stats(); st.Completed[admit.OutcomeOK] != 4 || st.Rejected.Total() != 0 {
		t.Errorf("completed %v rejected %v; want four served, none refused by the gate", st.Completed, st.Rejected)
	}
}

// h2ServerGoroutines counts the goroutines in net/http's HTTP/2 server
// connection code: a connection's serve loop and its handlers, those
// spawned but not yet run included (their frame is runHandler already).
func h2ServerGoroutines() int {
	buf := make([]byte, 1<<16)
	for {
		if n := runtime.Stack(buf, true); n < len(buf) {
			return bytes.Count(buf[:n], []byte("net/http.(*http2serverConn)."))
		}
		buf = make([]byte, 2*len(buf))
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// TestRapidResetHoldsNoSlots opens and resets 10,000 streams on one
// HTTP/2 connection (HEADERS then RST_STREAM, CVE-2023-44487) against a
// gated handler: afterwards no slot is held or queued, the gate's books
// balance, and a reset stream cost no more CPU (client and server, one
// process) than a refused request.
// About 5 s under -race: ten thousand streams and two thousand refused
// requests over real sockets.
func TestRapidResetHoldsNoSlots(t *testing.T) {
	const streams = 10_000
	f := start(t, admit.Config{Capacity: 4}, func(c *server.Config) { c.H2C = true })
	addr := strings.TrimPrefix(f.base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	var wmu sync.Mutex
	fr := http2.NewFramer(conn, conn)
	wmu.Lock()
	_ = fr.WriteSettings()
	wmu.Unlock()
	readDone := make(chan struct{})
	var goaway *http2.ErrCode
	go func() {
		defer close(readDone)
		for {
			frame, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch fm := frame.(type) {
			case *http2.SettingsFrame:
				if !fm.IsAck() {
					wmu.Lock()
					_ = fr.WriteSettingsAck()
					wmu.Unlock()
				}
			case *http2.GoAwayFrame:
				code := fm.ErrCode
				goaway = &code
			}
		}
	}()
	// A reset stream's handler may still be admitted (its first look at
	// the gate can come before it sees the reset); it then reports in on
	// f.entered, which must not fill up and hold it (and its slot) there.
	drained := make(chan struct{})
	defer close(drained)
	go func() {
		for {
			select {
			case <-f.entered:
			case <-drained:
				return
			}
		}
	}()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	start := cpuNow()
	sent := 0
	for i := range streams {
		id := uint32(2*i + 1)
		hbuf.Reset()
		for _, hf := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: addr}, {Name: ":path", Value: "/work"}} {
			_ = enc.WriteField(hf)
		}
		wmu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
		if err == nil {
			err = fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		wmu.Unlock()
		if err != nil {
			break // the server may end an abusive connection
		}
		sent++
	}
	// The connection's serve loop starts a queued handler whenever one
	// ends, so the gate can look settled between two handlers while more
	// are to come. End the connection from our side (the server reads
	// every frame first, then EOF), read what it still sends, and settle
	// only once its serve loop and every handler it spawned are gone.
	if h2ServerGoroutines() == 0 {
		t.Fatal("no HTTP/2 server goroutine while the connection is open: the check below would see nothing")
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	<-readDone
	conn.Close()
	eventually(t, "the connection's handlers to end and the gate to settle", func() bool {
		s := f.gate.Stats()
		return h2ServerGoroutines() == 0 && s.Inflight == 0 && s.Waiting == 0 && s.Admitted == s.Completed.Total() && s.Offered == s.Admitted+s.Rejected.Total()
	})
	resetCPU := (cpuNow() - start) / time.Duration(max(sent, 1))
	s := f.gate.Stats()
	t.Logf("%d streams opened and reset (GOAWAY: %v): gate offered %d, admitted %d, completed %v, rejected %v",
		sent, goaway, s.Offered, s.Admitted, s.Completed, s.Rejected)
	if sent < streams && goaway == nil {
		t.Errorf("only %d of %d streams sent, and no GOAWAY", sent, streams)
	}
	if s.Completed[admit.OutcomeOK] != 0 {
		t.Errorf("%d reset streams completed ok", s.Completed[admit.OutcomeOK])
	}

	// The same number of requests refused by a full gate, for comparison.
	var release [4]admit.Permit
	for i := range release {
		if release[i], err = f.gate.TryAcquire(); err != nil {
			t.Fatal(err)
		}
	}
	tr := h2cTransport(false)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	const refused = 2000
	start = cpuNow()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < refused; i += 4 {
				resp, err := client.Get(f.base + "/work")
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	refusedCPU := (cpuNow() - start) / refused
	for i := range release {
		release[i].Done(admit.OutcomeOK)
	}
	if n := f.gate.Stats().Rejected[admit.ReasonFull]; n < refused {
		t.Errorf("only %d requests refused full, want %d", n, refused)
	}
	t.Logf("CPU per reset stream %v, per refused HTTP/2 request %v (ratio %.2f)", resetCPU, refusedCPU, float64(resetCPU)/float64(refusedCPU))
	if resetCPU > 3*refusedCPU {
		t.Errorf("a reset stream cost %v of CPU, over three times a refused request's %v", resetCPU, refusedCPU)
	}
}
