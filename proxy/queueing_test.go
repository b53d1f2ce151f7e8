package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"
)

type answer struct {
	code int
	body refusalBody
}

// async sends a GET and delivers its answer on the returned channel.
func async(c *http.Client, u string, hdr ...string) <-chan answer {
	ch := make(chan answer, 1)
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			ch <- answer{code: -1}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var rb refusalBody
		_ = json.Unmarshal(b, &rb)
		ch <- answer{code: resp.StatusCode, body: rb}
	}()
	return ch
}

// waitQueued waits until gate name has n requests queued.
func waitQueued(t *testing.T, p *Proxy, name string, n int64) {
	t.Helper()
	g := gateByName(p, name)
	deadline := time.Now().Add(5 * time.Second)
	for g.Stats().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("gate %s: %d queued, want %d", name, g.Stats().Queued, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func recv(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
		return answer{}
	}
}

// TestPriorityShedsLowerClassFirst: with a priority header, a full queue
// sheds its newest sheddable request (503, reason shed, naming the gate)
// to make room for a critical one, and the critical one is served before
// the sheddable ones queued earlier; on the route's gate and on the
// upstream gate alike. /state shows the classes.
func TestPriorityShedsLowerClassFirst(t *testing.T) {
	q := Queueing{PriorityHeader: "X-Priority", ClassShares: []string{"critical_plus=0.1"}} // a share for sheddable would protect it from shedding
	for _, tc := range []struct {
		name string
		cfg  func(up *url.URL) Config
	}{
		{"route", func(up *url.URL) Config {
			return Config{Upstreams: []*url.URL{up}, MaxInflight: 8, Routes: []Route{
				{Name: "api", PathPrefix: "/", MaxInflight: 1, Queue: 2, MaxWait: Duration(10 * time.Second), Queueing: q}}}
		}},
		{GateUpstream, func(up *url.URL) Config {
			return Config{Upstreams: []*url.URL{up}, MaxInflight: 1, Queue: 2, MaxWait: 10 * time.Second, Queueing: q}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newBlock()
			p := mustNew(t, tc.cfg(backend(t, ts.ServeHTTP)))
			base, c := front(t, p)
			gate := "api"
			if tc.name == GateUpstream {
				gate = GateUpstream
			}
			c0 := async(c, base+"/c0")
			if got := ts.next(t); got != "/c0" {
				t.Fatalf("first request reached the upstream as %q", got)
			}
			s1 := async(c, base+"/s1", "X-Priority", "sheddable")
			waitQueued(t, p, gate, 1)
			s2 := async(c, base+"/s2", "X-Priority", "sheddable")
			waitQueued(t, p, gate, 2)
			c3 := async(c, base+"/c3", "X-Priority", "no-such-class") // unknown: the default, critical
			if a := recv(t, s2); a.code != 503 || a.body.Gate != gate || a.body.Reason != "shed" {
				t.Fatalf("newest sheddable request: %d %+v; want 503 from gate %s, reason shed", a.code, a.body, gate)
			}
			waitQueued(t, p, gate, 2)
			st := p.State()
			gs := &st.Upstream
			if tc.name == "route" {
				gs = st.Routes[0].Gate
			}
			if gs.PriorityHeader != "X-Priority" || len(gs.Classes) != 4 || gs.Classes[3].Class != "sheddable" ||
				gs.Classes[3].Shed != 1 || gs.Classes[0].Share != 0.1 || gs.Classes[3].Waiting != 1 || gs.QueueAgeSeconds <= 0 {
				t.Fatalf("/state of gate %s: %+v", gate, gs)
			}
			ts.pass <- struct{}{} // c0 ends: the critical c3 goes before the older sheddable s1
			if got := ts.next(t); got != "/c3" {
				t.Fatalf("after the first request ended, %q reached the upstream; want the critical /c3", got)
			}
			ts.pass <- struct{}{}
			if got := ts.next(t); got != "/s1" {
				t.Fatalf("then %q; want /s1", got)
			}
			ts.pass <- struct{}{}
			for name, ch := range map[string]<-chan answer{"c0": c0, "s1": s1, "c3": c3} {
				if a := recv(t, ch); a.code != 200 {
					t.Errorf("%s: %d %+v; want 200", name, a.code, a.body)
				}
			}
			waitIdle(t, p, 5*time.Second)
		})
	}
}

// TestRouteQueueDiscipline: a route's queue_discipline orders its queue
// (lifo: newest first) and shows in /state with the queue's age; another
// route's codel shows too; the upstream gate stays fifo.
func TestRouteQueueDiscipline(t *testing.T) {
	ts := newBlock()
	p := mustNew(t, Config{Upstreams: []*url.URL{backend(t, ts.ServeHTTP)}, MaxInflight: 8, Routes: []Route{
		{Name: "newest", PathPrefix: "/n", MaxInflight: 1, Queue: 3, MaxWait: Duration(10 * time.Second), Queueing: Queueing{Discipline: "lifo"}},
		{Name: "controlled", PathPrefix: "/c", MaxInflight: 1, Queue: 3, Queueing: Queueing{Discipline: "CoDel"}},
	}})
	base, c := front(t, p)
	var answers []<-chan answer
	answers = append(answers, async(c, base+"/n0"))
	if got := ts.next(t); got != "/n0" {
		t.Fatalf("first request reached the upstream as %q", got)
	}
	for i := 1; i <= 3; i++ {
		answers = append(answers, async(c, fmt.Sprintf("%s/n%d", base, i)))
		waitQueued(t, p, "newest", int64(i))
	}
	time.Sleep(2 * time.Millisecond) // the oldest waiter has measurably waited
	st := p.State()
	if g := st.Routes[0].Gate; g.Discipline != "lifo" || g.Waiting != 3 || g.QueueAgeSeconds <= 0 || g.Classes != nil {
		t.Fatalf("route newest in /state: %+v", g)
	}
	if g := st.Routes[1].Gate; g.Discipline != "codel" || g.QueueAgeSeconds != 0 {
		t.Fatalf("route controlled in /state: %+v", g)
	}
	if st.Upstream.Discipline != "fifo" {
		t.Fatalf("upstream gate in /state: %+v", st.Upstream)
	}
	for _, want := range []string{"/n3", "/n2", "/n1"} {
		ts.pass <- struct{}{}
		if got := ts.next(t); got != want {
			t.Fatalf("%q reached the upstream; want %q (newest first)", got, want)
		}
	}
	ts.pass <- struct{}{}
	for i, ch := range answers {
		if a := recv(t, ch); a.code != 200 {
			t.Errorf("n%d: %d %+v", i, a.code, a.body)
		}
	}
	waitIdle(t, p, 5*time.Second)
}
