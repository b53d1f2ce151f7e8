package doctor

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// streamDump is n goroutines of a static server sending a large file to
// clients that do not read it (sendfile waiting to write, under the
// handler's ReadFrom), one idle keep-alive read, and one upstream write of
// a proxy (a client connection, not a response).
func streamDump(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `goroutine %d [IO wait]:
internal/poll.runtime_pollWait(0x7f8cf0bc8000, 0x77)
	/go/src/runtime/netpoll.go:351 +0x85
internal/poll.(*pollDesc).wait(0xc000, 0xc000, 0x0)
	/go/src/internal/poll/fd_poll_runtime.go:84 +0x27
internal/poll.(*pollDesc).waitWrite(...)
	/go/src/internal/poll/fd_poll_runtime.go:93
internal/poll.sendFile(0xc000, 0xc, 0x0, 0x10000)
	/go/src/internal/poll/sendfile_unix.go:106 +0x39d
internal/poll.SendFile(0xc000, 0x423274, 0x800000)
	/go/src/internal/poll/sendfile_unix.go:35 +0x18
net.sendFile.func1(0xc000)
	/go/src/net/sendfile.go:50 +0x3e
internal/poll.(*FD).RawRead(0xc000, 0xc000)
	/go/src/internal/poll/fd_unix.go:707 +0x108
net.(*TCPConn).ReadFrom(0xc000, {0xd78d20, 0xc000})
	/go/src/net/tcpsock.go:165 +0x30
github.com/sluicehq/sluice/connlimit.(*Conn).ReadFrom(0xc000, {0xd78d20, 0xc000})
	/src/sluice/connlimit/conn.go:104 +0x84
net/http.(*response).ReadFrom(0xc000, {0xd78d20, 0xc000})
	/go/src/net/http/server.go:618 +0x28d
github.com/sluicehq/sluice/static.(*diskResponse).ReadFrom(0xc000, {0xd78d20, 0xc000})
	/src/sluice/static/disk.go:196 +0x2ae
io.copyBuffer({0xd7a320, 0xc000}, {0xd78d20, 0xc000}, {0x0, 0x0, 0x0})
	/go/src/io/io.go:415 +0x151
github.com/sluicehq/sluice/static.(*Handler).ServeHTTP(0xc000, {0xd7dd50, 0xc000}, 0xc000)
	/src/sluice/static/handler.go:211 +0x32d
net/http.(*conn).serve(0xc000, {0xd7ed38, 0xc000})
	/go/src/net/http/server.go:2067 +0x690
created by net/http.(*Server).Serve in goroutine 29
	/go/src/net/http/server.go:3464 +0x485

`, 100+i)
	}
	b.WriteString(`goroutine 7 [IO wait]:
internal/poll.runtime_pollWait(0x7f8cf0bc8000, 0x72)
	/go/src/runtime/netpoll.go:351 +0x85
internal/poll.(*pollDesc).wait(0xc000, 0xc000, 0x0)
	/go/src/internal/poll/fd_poll_runtime.go:84 +0x27
internal/poll.(*pollDesc).waitRead(...)
	/go/src/internal/poll/fd_poll_runtime.go:89
internal/poll.(*FD).Read(0xc000, {0xc000, 0x1, 0x1})
	/go/src/internal/poll/fd_unix.go:165 +0x27a
net.(*conn).Read(0xc000, {0xc000, 0x1, 0x1})
	/go/src/net/net.go:196 +0x45
net/http.(*connReader).backgroundRead(0xc000)
	/go/src/net/http/server.go:690 +0x37
created by net/http.(*connReader).startBackgroundRead in goroutine 100
	/go/src/net/http/server.go:686 +0xb6

goroutine 8 [IO wait]:
internal/poll.runtime_pollWait(0x7f8cf0bc8000, 0x77)
	/go/src/runtime/netpoll.go:351 +0x85
internal/poll.(*pollDesc).wait(0xc000, 0xc000, 0x0)
	/go/src/internal/poll/fd_poll_runtime.go:84 +0x27
internal/poll.(*pollDesc).waitWrite(...)
	/go/src/internal/poll/fd_poll_runtime.go:93
internal/poll.(*FD).Write(0xc000, {0xc000, 0x1000, 0x1000})
	/go/src/internal/poll/fd_unix.go:399 +0x3fa
net.(*conn).Write(0xc000, {0xc000, 0x1000, 0x1000})
	/go/src/net/net.go:208 +0x45
net/http.(*persistConn).writeLoop(0xc000)
	/go/src/net/http/transport.go:2600 +0x174
created by net/http.(*Transport).dialConn in goroutine 9
	/go/src/net/http/transport.go:2050 +0x1b45
`)
	return b.String()
}

// TestGoroutinesWritingToSlowClients: a file sent with sendfile waits to
// write under a ReadFrom; it is a response to a client that reads slowly
// (the handler's site named), not a network read; a proxy's write to its
// upstream is a network write.
func TestGoroutinesWritingToSlowClients(t *testing.T) {
	s, err := ParseGoroutines(strings.NewReader(streamDump(3)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]GoroutineGroup{}
	for _, g := range s.Groups {
		got[g.Where] = g
	}
	if g := got[WhereClientWrite]; g.Count != 3 || g.Sites[0].Function != "github.com/sluicehq/sluice/static.(*diskResponse).ReadFrom" {
		t.Errorf("client writes: %+v, want 3 in static.(*diskResponse).ReadFrom", g)
	}
	if g := got[WhereNetworkRead]; g.Count != 1 {
		t.Errorf("network reads: %+v, want the one idle keep-alive", g)
	}
	if g := got[WhereNetworkWrite]; g.Count != 1 || g.Sites[0].Function != "net/http.(*persistConn).writeLoop" {
		t.Errorf("network writes: %+v, want the upstream write", g)
	}
}

// TestStallOfSlowClientsNamesThem: a gate whose held slots each have a
// goroutine writing a response to a slow client is diagnosed as slow
// clients (a warning), not as a stall (a hang, a deadlock, a leak); with
// fewer writers than slots it is still a stall, which mentions them; the
// longest column gives the figures the server knows.
func TestStallOfSlowClientsNamesThem(t *testing.T) {
	before, after, _ := loadCase(t, "stalled") // gate db: 3 slots held, nothing completed in 1 s
	codes := func(d *Diagnosis) map[string]Finding {
		m := map[string]Finding{}
		for _, f := range d.Findings {
			m[f.Code] = f
		}
		return m
	}
	three, err := ParseGoroutines(strings.NewReader(streamDump(3)))
	if err != nil {
		t.Fatal(err)
	}
	d := Diagnose(before, after, three)
	fs := codes(d)
	slow, ok := fs[CodeSlowClients]
	if _, stalled := fs[CodeStalled]; !ok || stalled || slow.Severity != Warn || !strings.Contains(slow.Seen, "3 goroutines write responses to clients that read slowly") ||
		!strings.Contains(slow.Seen, "static.(*diskResponse).ReadFrom") || strings.Contains(slow.Meaning, "deadlock") {
		t.Errorf("three slots, three slow clients: findings %+v", d.Findings)
	}
	var b strings.Builder
	if err := d.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`client write\s+3\s+≥ 1.00 s`).MatchString(b.String()) {
		t.Errorf("the client writes' longest wait is at least the stalled interval:\n%s", b.String())
	}

	one, _ := ParseGoroutines(strings.NewReader(streamDump(1)))
	fs = codes(Diagnose(before, after, one))
	if st, ok := fs[CodeStalled]; !ok || fs[CodeSlowClients].Code != "" || !strings.Contains(st.Seen, "1 goroutines write responses to clients") {
		t.Errorf("three slots, one slow client: findings %+v", fs)
	}
	if st := codes(Diagnose(before, after, nil))[CodeStalled]; !strings.Contains(st.Meaning, "clients that read gated responses slowly") {
		t.Errorf("without a dump the stall does not name slow clients as a cause: %+v", st)
	}
}

// TestLongestWaitFromTheServersFigures: the gate queue's longest wait is
// the oldest waiter's age the gate exports, not a dash.
func TestLongestWaitFromTheServersFigures(t *testing.T) {
	before, after, gs := loadCase(t, "goroutines")
	age := 12.5
	for _, g := range after.Gates {
		g.OldestWait = &age
	}
	d := Diagnose(before, after, gs)
	for _, g := range d.Goroutines.Groups {
		if g.Where == WhereGateQueue && (g.LongestSeconds != 12.5 || longestOf(g) != secs(12.5)) {
			t.Errorf("gate queue: longest %v (%q), want the oldest waiter's 12.5 s", g.LongestSeconds, longestOf(g))
		}
	}
	for _, g := range gs.Groups {
		if g.LongestSeconds != 0 {
			t.Error("Diagnose changed the summary it was given")
		}
	}
}
