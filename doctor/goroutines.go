package doctor

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Where a goroutine waits, as doctor groups them.
const (
	WhereGateQueue     = "gate queue"     // queued for an admission slot
	WhereNetworkRead   = "network read"   // blocked reading a socket (idle keep-alive, slow client, slow upstream)
	WhereNetworkWrite  = "network write"  // blocked writing a socket (a slow upstream, a slow peer)
	WhereClientWrite   = "client write"   // blocked writing a response to a client that reads slowly
	WhereNetworkAccept = "network accept" // a listener waiting for connections
	WhereLock          = "lock"           // sync.Mutex, RWMutex, Cond, semaphore
	WhereChannel       = "channel"        // chan send/receive, select
	WhereSleep         = "sleep"          // time.Sleep
	WhereSyscall       = "syscall"        // in a system call
	WhereRunning       = "running"        // running or runnable
	WhereOther         = "other"
)

// GoroutineSummary groups a goroutine dump by where each goroutine waits.
type GoroutineSummary struct {
	Total  int              `json:"total"`
	Groups []GoroutineGroup `json:"groups"` // most goroutines first
}

// GoroutineGroup is the goroutines waiting in one kind of place.
type GoroutineGroup struct {
	Where string `json:"where"`
	Count int    `json:"count"`
	// LongestMinutes is the longest wait the dump reports (Go prints it
	// for waits of a minute or more; zero: every wait was shorter).
	LongestMinutes int `json:"longest_minutes"`
	// LongestSeconds, when known, is the longest wait from the server's
	// own figures, which Diagnose adds: for the gate queue the oldest
	// waiter's age; for client writes, how long the slots of a stalled
	// gate have been held at least (LongestAtLeast).
	LongestSeconds float64 `json:"longest_seconds,omitempty"`
	LongestAtLeast bool    `json:"longest_at_least,omitempty"`
	Sites          []Site  `json:"sites"` // the waiting functions, most goroutines first
}

// Site is a function goroutines wait in: the first frame outside the
// runtime and the standard library's plumbing.
type Site struct {
	Function string `json:"function"`
	Count    int    `json:"count"`
}

// maxGoroutineLine bounds one line of a dump (long argument lists).
const maxGoroutineLine = 1 << 20

// ParseGoroutines reads a full goroutine dump: the text of
// /debug/pprof/goroutine?debug=2 (the same format as a crash's stack
// trace). It is hand-written because doctor needs only each goroutine's
// wait state and function names from a simple, stable format; a general
// stack-parsing library would be a dependency larger than the job.
func ParseGoroutines(r io.Reader) (*GoroutineSummary, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxInput))
	sc.Buffer(make([]byte, 64<<10), maxGoroutineLine)
	type gr struct {
		state   string
		minutes int
		frames  []string
	}
	var all []gr
	var cur *gr
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "goroutine "):
			state, minutes, ok := parseGoroutineHeader(line)
			if !ok {
				return nil, fmt.Errorf("%w: goroutines: bad header %q", ErrBadInput, truncate(line))
			}
			all = append(all, gr{state: state, minutes: minutes})
			cur = &all[len(all)-1]
		case line == "":
			cur = nil
		case strings.HasPrefix(line, "\t"), strings.HasPrefix(line, "created by "), strings.HasPrefix(line, "..."):
			// file:line, the creator, or elided frames
		case cur != nil:
			cur.frames = append(cur.frames, funcName(line))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: goroutines: %v", ErrBadInput, err)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: goroutines: no goroutine in the dump (want the text of /debug/pprof/goroutine?debug=2)", ErrBadInput)
	}
	groups := map[string]*GoroutineGroup{}
	sites := map[string]map[string]int{}
	for _, g := range all {
		where := classify(g.state, g.frames)
		grp := groups[where]
		if grp == nil {
			grp = &GoroutineGroup{Where: where}
			groups[where] = grp
			sites[where] = map[string]int{}
		}
		grp.Count++
		grp.LongestMinutes = max(grp.LongestMinutes, g.minutes)
		sites[where][site(g.frames, where)]++
	}
	s := &GoroutineSummary{Total: len(all)}
	for where, grp := range groups {
		for fn, n := range sites[where] {
			grp.Sites = append(grp.Sites, Site{Function: fn, Count: n})
		}
		sort.Slice(grp.Sites, func(i, j int) bool {
			if grp.Sites[i].Count != grp.Sites[j].Count {
				return grp.Sites[i].Count > grp.Sites[j].Count
			}
			return grp.Sites[i].Function < grp.Sites[j].Function
		})
		s.Groups = append(s.Groups, *grp)
	}
	sort.Slice(s.Groups, func(i, j int) bool {
		if s.Groups[i].Count != s.Groups[j].Count {
			return s.Groups[i].Count > s.Groups[j].Count
		}
		return s.Groups[i].Where < s.Groups[j].Where
	})
	return s, nil
}

// parseGoroutineHeader reads "goroutine 7 [chan receive, 3 minutes]:".
func parseGoroutineHeader(line string) (state string, minutes int, ok bool) {
	open := strings.IndexByte(line, '[')
	end := strings.LastIndexByte(line, ']')
	if open < 0 || end < open {
		return "", 0, false
	}
	if _, err := strconv.ParseUint(strings.TrimSpace(line[len("goroutine "):open]), 10, 64); err != nil {
		return "", 0, false
	}
	parts := strings.Split(line[open+1:end], ",")
	state = strings.TrimSpace(parts[0])
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		if n, found := strings.CutSuffix(p, " minutes"); found {
			minutes, _ = strconv.Atoi(n)
		}
	}
	return state, minutes, true
}

// funcName strips the argument list from a frame line:
// "pkg.(*T).m(0xc000..., 0x1)" -> "pkg.(*T).m".
func funcName(line string) string {
	line = strings.TrimSpace(line)
	if strings.HasSuffix(line, ")") {
		depth := 0
		for i := len(line) - 1; i >= 0; i-- {
			switch line[i] {
			case ')':
				depth++
			case '(':
				depth--
				if depth == 0 {
					return line[:i]
				}
			}
		}
	}
	return line
}

// classify decides where a goroutine waits from its state and frames.
func classify(state string, frames []string) string {
	has := func(sub string) bool {
		for _, f := range frames {
			if strings.Contains(f, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case strings.Contains(state, "Mutex") || strings.Contains(state, "semacquire") || strings.Contains(state, "sync.Cond") || strings.Contains(state, "sync.WaitGroup"):
		return WhereLock
	case has("/admit.(*Gate)."):
		return WhereGateQueue
	case state == "IO wait":
		// The poller says which way the socket waits (waitRead or
		// waitWrite, its first frames); a file sent with sendfile or
		// splice waits to write under a ReadFrom, so function names
		// alone would call it a read.
		writing := has("(*pollDesc).waitWrite") || has("sendFile") || has("SendFile") || has("splice") ||
			!has("(*pollDesc).waitRead") && (has(".Write") || has(".write"))
		switch {
		case has("Accept"):
			return WhereNetworkAccept
		case writing && has("net/http.(*conn).serve"):
			return WhereClientWrite // a handler's response, held up by its reader
		case writing:
			return WhereNetworkWrite
		}
		return WhereNetworkRead
	case strings.HasPrefix(state, "chan ") || strings.HasPrefix(state, "select"):
		return WhereChannel
	case state == "sleep":
		return WhereSleep
	case state == "syscall":
		return WhereSyscall
	case state == "running" || state == "runnable":
		return WhereRunning
	}
	return WhereOther
}

// site is the first frame outside the plumbing (packages whose frames say
// how a goroutine waits, not who is waiting), or the first frame. For a
// response written to a client, net/http's writer and connlimit's
// connection are plumbing too: the site is what produces the response.
func site(frames []string, where string) string {
	plumbing := []string{"runtime.", "internal/", "sync.", "syscall.", "net.", "os.", "io.", "bufio.", "time.", "context.", "crypto/tls."}
	if where == WhereClientWrite {
		plumbing = append(plumbing, "net/http.", "github.com/sluicehq/sluice/connlimit.")
	}
	if len(frames) == 0 {
		return "?"
	}
	for _, f := range frames {
		plumb := false
		for _, p := range plumbing {
			if strings.HasPrefix(f, p) {
				plumb = true
				break
			}
		}
		if !plumb {
			return f
		}
	}
	return frames[0]
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
