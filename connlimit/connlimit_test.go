package connlimit

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(floodChildEnv); mode != "" {
		os.Exit(runFloodChild(mode))
	}
	goleak.VerifyTestMain(m)
}

func TestConfigRejectsOutOfRangeFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative MaxConns", Config{MaxConns: -1}, "MaxConns -1 is negative"},
		{"negative Reserve", Config{Reserve: -5}, "Reserve -5 is negative"},
		{"negative BusyWriteTimeout", Config{BusyWriteTimeout: -time.Second}, "BusyWriteTimeout -1s is negative"},
		{"negative MaxRefusing", Config{MaxRefusing: -1}, "MaxRefusing -1 is negative"},
		{"tiny MaxAcceptBackoff", Config{MaxAcceptBackoff: time.Millisecond}, "MaxAcceptBackoff 1ms is below 5ms"},
		{"negative MaxAcceptBackoff", Config{MaxAcceptBackoff: -time.Second}, "MaxAcceptBackoff -1s is below 5ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig", err)
			}
			_, err := New(nil, tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New: %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestListenDoesNotBindOnBadConfig(t *testing.T) {
	l, err := Listen(t.Context(), "tcp", "127.0.0.1:0", Config{MaxConns: -3})
	if !errors.Is(err, ErrInvalidConfig) || l != nil {
		t.Fatalf("Listen = %v, %v; want nil, ErrInvalidConfig", l, err)
	}
}

func TestDerivedLimit(t *testing.T) {
	fixed := func(n uint64) func() (uint64, error) {
		return func() (uint64, error) { return n, nil }
	}
	for _, tc := range []struct {
		name         string
		soft         uint64
		cfg          Config
		wantMax      int
		wantRefusing int
	}{
		// Reserve defaults to max(64, limit/10).
		{"small limit keeps 64 back", 256, Config{}, 256 - 64, 16},
		{"large limit keeps a tenth back", 65536, Config{}, 65536 - 6553, DefaultMaxRefusing},
		{"explicit reserve", 1024, Config{Reserve: 24}, 1000, 6},
		{"explicit MaxRefusing wins", 1024, Config{Reserve: 24, MaxRefusing: 9}, 1000, 9},
		{"unlimited is capped", 1 << 62, Config{}, fallbackNoFileLimit - fallbackNoFileLimit/10, DefaultMaxRefusing},
		// An explicit MaxConns must fit with its refusals and 16 more; the
		// refusals shrink to a quarter of what is left over.
		{"explicit MaxConns that fits", 20000, Config{MaxConns: 5000}, 5000, DefaultMaxRefusing},
		{"explicit MaxConns under a small limit", 64, Config{MaxConns: 40}, 40, 2},
		{"explicit MaxConns and reserve", 64, Config{MaxConns: 44, Reserve: 20}, 44, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newListener(nil, tc.cfg, fixed(tc.soft))
			if err != nil {
				t.Fatal(err)
			}
			if l.MaxConns() != tc.wantMax || l.Stats().MaxConns != tc.wantMax {
				t.Errorf("MaxConns = %d, want %d", l.MaxConns(), tc.wantMax)
			}
			if l.cfg.maxRefusing != tc.wantRefusing {
				t.Errorf("maxRefusing = %d, want %d", l.cfg.maxRefusing, tc.wantRefusing)
			}
		})
	}

	t.Run("explicit MaxConns beyond the limit", func(t *testing.T) {
		// ulimit -n 64 with --max-conns 200: refused, naming what fits.
		_, err := newListener(nil, Config{MaxConns: 200}, fixed(64))
		if !errors.Is(err, ErrNoHeadroom) || !strings.Contains(err.Error(), "largest that fits is 47") {
			t.Fatalf("err = %v, want ErrNoHeadroom naming the largest MaxConns that fits", err)
		}
		_, err = newListener(nil, Config{MaxConns: 10}, fixed(10))
		if !errors.Is(err, ErrNoHeadroom) || !strings.Contains(err.Error(), "leaves no room") {
			t.Fatalf("err = %v, want ErrNoHeadroom", err)
		}
		if err := (Config{MaxConns: 1<<20 + 1}).Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("MaxConns above 1<<20: %v, want ErrInvalidConfig", err)
		}
	})
	t.Run("no headroom", func(t *testing.T) {
		_, err := newListener(nil, Config{}, fixed(64))
		if !errors.Is(err, ErrNoHeadroom) || !strings.Contains(err.Error(), "RLIMIT_NOFILE 64, reserve 64") {
			t.Fatalf("err = %v, want ErrNoHeadroom naming the numbers", err)
		}
	})
	t.Run("unreadable limit", func(t *testing.T) {
		_, err := newListener(nil, Config{}, func() (uint64, error) { return 0, syscall.ENOSYS })
		if !errors.Is(err, syscall.ENOSYS) || !strings.Contains(err.Error(), "set MaxConns") {
			t.Fatalf("err = %v, want the cause and advice to set MaxConns", err)
		}
	})
}

func TestOverLimitGetsBusyReplyAndClose(t *testing.T) {
	l := startServer(t, Config{MaxConns: 2}, nil)
	a, b := dial(t, l.Addr()), dial(t, l.Addr())
	a.mustGet("/")
	b.mustGet("/")

	over := dial(t, l.Addr())
	resp, body, err := over.get("/")
	if err != nil {
		t.Fatalf("over-limit GET: %v", err)
	}
	checkBusyReply(t, resp, body)
	over.waitEOF(ioTimeout)

	// The held connections were not disturbed.
	a.mustGet("/")
	b.mustGet("/")

	s := l.Stats()
	if s.Open != 2 || s.Accepted != 2 || s.Rejected[ReasonMaxConns] != 1 || s.BusyWriteErrors != 0 {
		t.Errorf("stats = %+v, want open 2, accepted 2, rejected 1", s)
	}
}

// A real net/http client sees the 503 as an ordinary response.
func TestHTTPClientSeesBusyReply(t *testing.T) {
	l := startServer(t, Config{MaxConns: 1}, nil)
	dial(t, l.Addr()).mustGet("/")

	client := &http.Client{Transport: &http.Transport{}, Timeout: ioTimeout}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	checkBusyReply(t, resp, string(body))
}

func TestSlotFreesAfterClose(t *testing.T) {
	l := startServer(t, Config{MaxConns: 1}, nil)
	held := dial(t, l.Addr())
	held.mustGet("/")
	if resp, _, err := dial(t, l.Addr()).get("/"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second connection: %v %v, want 503", resp, err)
	}

	_ = held.conn.Close()
	eventually(t, "the slot to be released", func() bool { return l.Stats().Open == 0 })
	dial(t, l.Addr()).mustGet("/")
	if s := l.Stats(); s.Accepted != 2 || s.Rejected[ReasonMaxConns] != 1 {
		t.Errorf("stats = %+v, want accepted 2, rejected 1", s)
	}
}

// Many clients arrive at once over the limit: each reads its 503 and the
// close promptly; none is left waiting in the backlog.
func TestFloodOverLimitIsAnsweredNotQueued(t *testing.T) {
	const clients = 40
	l := startServer(t, Config{MaxConns: 1, MaxRefusing: 8}, nil)
	dial(t, l.Addr()).mustGet("/")

	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			c := dial(t, l.Addr())
			resp, body, err := c.get("/")
			if err != nil {
				errs <- err
				return
			}
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"BUSY"`) {
				errs <- errors.New("got " + resp.Status + " " + body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := l.Stats(); s.Rejected[ReasonMaxConns] != clients || s.Open != 1 {
		t.Errorf("stats = %+v, want %d rejected and 1 open", s, clients)
	}
}

// A client that sent a body the server never reads still gets the busy
// reply: the refusal lingers instead of resetting the connection.
func TestRefusalSurvivesUnreadRequestBody(t *testing.T) {
	l := startServer(t, Config{MaxConns: 1}, nil)
	dial(t, l.Addr()).mustGet("/")

	c := dial(t, l.Addr())
	body := strings.Repeat("x", 32<<10)
	req := "POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: 32768\r\n\r\n" + body
	if _, err := io.WriteString(c.conn, req); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, got, err := c.read()
	if err != nil {
		t.Fatalf("read busy reply: %v", err)
	}
	checkBusyReply(t, resp, got)
}

// Lingering refusals are bounded by MaxRefusing; the rest are closed at
// once but still answered; Close ends the lingering ones.
func TestLingeringRefusalsAreBounded(t *testing.T) {
	const maxRefusing, clients = 2, 5
	l, err := Listen(t.Context(), "tcp", "127.0.0.1:0", Config{MaxConns: 1, MaxRefusing: maxRefusing, RefuseLinger: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	acceptErr := make(chan error, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
		_, err := l.Accept() // refuses the rest, returns on Close
		acceptErr <- err
	}()
	dial(t, l.Addr())
	held := <-accepted
	defer held.Close()

	refused := make([]*rawClient, clients)
	for i := range refused {
		refused[i] = dial(t, l.Addr())
		resp, body, err := refused[i].read()
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		checkBusyReply(t, resp, body)
	}
	// These clients never close, so their refusals keep lingering.
	eventually(t, "all refusals", func() bool { return l.Stats().Rejected[ReasonMaxConns] == clients })
	if got := l.Stats().Refusing; got != maxRefusing {
		t.Errorf("Refusing = %d, want the bound %d", got, maxRefusing)
	}

	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-acceptErr; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if got := l.Stats().Refusing; got != 0 {
		t.Errorf("Refusing after Close = %d, want 0", got)
	}
	for _, c := range refused {
		c.waitEOF(ioTimeout)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// An empty non-nil BusyReply closes over-limit connections silently.
func TestEmptyBusyReplyClosesSilently(t *testing.T) {
	l := startServer(t, Config{MaxConns: 1, BusyReply: []byte{}}, nil)
	dial(t, l.Addr()).mustGet("/")
	c := dial(t, l.Addr())
	c.waitEOF(ioTimeout)
	if s := l.Stats(); s.Rejected[ReasonMaxConns] != 1 {
		t.Errorf("rejected = %d, want 1", s.Rejected[ReasonMaxConns])
	}
}

func TestHTTPBusyReplyRetryAfter(t *testing.T) {
	for in, want := range map[int]string{-3: "Retry-After: 1\r\n", 0: "Retry-After: 1\r\n", 7: "Retry-After: 7\r\n"} {
		if got := string(HTTPBusyReply(in)); !strings.Contains(got, want) {
			t.Errorf("HTTPBusyReply(%d) lacks %q:\n%s", in, want, got)
		}
	}
}

// Close is idempotent: the slot is released once, the count never goes
// negative, and the limit still holds afterwards.
func TestConnCloseReleasesExactlyOnce(t *testing.T) {
	l, err := Listen(t.Context(), "tcp", "127.0.0.1:0", Config{MaxConns: 2, RefuseLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conns := make(chan net.Conn)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
		}
	}()

	dial(t, l.Addr())
	first := <-conns
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = first.Close() })
	}
	wg.Wait()
	if err := first.Close(); err != nil {
		t.Errorf("repeated Close = %v, want the first Close's nil result", err)
	}
	if got := l.Stats().Open; got != 0 {
		t.Fatalf("Open after repeated Close = %d, want 0", got)
	}

	// Two fit; the third must be refused. A double release would have let
	// three in.
	dial(t, l.Addr())
	dial(t, l.Addr())
	a, b := <-conns, <-conns
	defer a.Close()
	defer b.Close()
	third := dial(t, l.Addr())
	resp, _, err := third.read()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third connection: %v %v, want 503", resp, err)
	}
	if s := l.Stats(); s.Open != 2 || s.Accepted != 3 || s.Rejected[ReasonMaxConns] != 1 {
		t.Errorf("stats = %+v, want open 2, accepted 3, rejected 1", s)
	}
}

func TestConnForwardsOptionalMethods(t *testing.T) {
	l, err := Listen(t.Context(), "tcp", "127.0.0.1:0", Config{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client := dial(t, l.Addr())
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := nc.(*Conn)
	if _, ok := c.NetConn().(*net.TCPConn); !ok {
		t.Fatalf("NetConn = %T, want *net.TCPConn", c.NetConn())
	}
	if n, err := c.ReadFrom(strings.NewReader("hello")); n != 5 || err != nil {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	got, err := io.ReadAll(client.br)
	if err != nil || string(got) != "hello" {
		t.Fatalf("client read %q, %v; want \"hello\" then EOF from CloseWrite", got, err)
	}
}
