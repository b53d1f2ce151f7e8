package connlimit

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Reaching the limit is logged once per episode, not once per refusal,
// and the way back below the limit once.
func TestLimitTransitionsAreLoggedOnce(t *testing.T) {
	var out syncBuffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l := startServer(t, Config{MaxConns: 1, Logger: logger}, nil)
	held := dial(t, l.Addr())
	held.mustGet("/")
	for range 3 {
		if resp, _, err := dial(t, l.Addr()).get("/"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("over-limit GET: %v %v", resp, err)
		}
	}
	_ = held.conn.Close()
	eventually(t, "the slot to be released", func() bool { return l.Stats().Open == 0 })

	logs := out.String()
	if n := strings.Count(logs, "connection limit reached"); n != 1 {
		t.Errorf("limit-reached logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "max_conns=1") {
		t.Errorf("limit-reached line lacks the level or the limit:\n%s", logs)
	}
	if n := strings.Count(logs, "back below the limit"); n != 1 {
		t.Errorf("recovery logged %d times, want once:\n%s", n, logs)
	}
}
