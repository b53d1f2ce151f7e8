package httpgate_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

var fieldNames = httpgate.RuleNames{Discipline: "queue_discipline", PriorityHeader: "priority_header", ClassShares: "class_shares", Queue: "queue"}

func TestQueueRulesCompile(t *testing.T) {
	c, err := httpgate.QueueRules{Discipline: "LIFO", PriorityHeader: "X-Priority", ClassShares: []string{"sheddable=0.1", "critical=20%"}}.Compile(4, fieldNames)
	if err != nil {
		t.Fatal(err)
	}
	want := admit.ClassShares{admit.ClassSheddable: 0.1, admit.ClassCritical: 0.2}
	if c.Policy.Discipline != admit.DisciplineLIFO || !c.Policy.ContextClass || c.Policy.ClassShares != want || c.Classify == nil {
		t.Fatalf("compiled %+v", c.Policy)
	}
	var got admit.Class = 99
	h := c.Classify(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = admit.ClassFrom(r.Context()) }))
	for v, class := range map[string]admit.Class{"sheddable": admit.ClassSheddable, "bogus": admit.ClassCritical, "": admit.ClassCritical} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if v != "" {
			r.Header.Set("X-Priority", v)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got != class {
			t.Errorf("header %q: class %v; want %v", v, got, class)
		}
	}
	if c, err := (httpgate.QueueRules{}).Compile(0, fieldNames); err != nil || c.Classify != nil || c.Policy != (admit.Queueing{}) {
		t.Fatalf("zero rules: %+v, %v", c, err)
	}
}

func TestQueueRulesErrorsNameTheRule(t *testing.T) {
	for _, tc := range []struct {
		rules httpgate.QueueRules
		queue int
		want  string
	}{
		{httpgate.QueueRules{Discipline: "stack"}, 4, `queue_discipline "stack": want fifo, lifo or codel`},
		{httpgate.QueueRules{Discipline: "codel"}, 0, "queue_discipline codel needs queue"},
		{httpgate.QueueRules{PriorityHeader: "X P"}, 4, `priority_header "X P"`},
		{httpgate.QueueRules{PriorityHeader: "X-P"}, 0, "priority_header needs queue"},
		{httpgate.QueueRules{PriorityHeader: "X-P", ClassShares: []string{"bulk=0.1"}}, 4, `class_shares: class share "bulk=0.1": unknown class`},
		{httpgate.QueueRules{ClassShares: []string{"sheddable=0.1"}}, 4, "class_shares needs priority_header"},
		{httpgate.QueueRules{PriorityHeader: "X-P", ClassShares: []string{"sheddable=0.6", "critical=0.6"}}, 4, "more than 1"},
	} {
		_, err := tc.rules.Compile(tc.queue, fieldNames)
		if !errors.Is(err, httpgate.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "invalid config") {
			t.Errorf("%+v queue %d: error %v; want ErrInvalidConfig saying %q (without the sentinel's text)", tc.rules, tc.queue, err, tc.want)
		}
	}
}

// FuzzQueueRules: compiled rules are accepted by a gate; a refusal wraps
// ErrInvalidConfig; nothing panics.
func FuzzQueueRules(f *testing.F) {
	f.Add("lifo", "X-Priority", "sheddable=0.1", 4)
	f.Add("codel", "", "", 0)
	f.Add("FIFO", "X P", "critical=2", 1)
	f.Fuzz(func(t *testing.T, disc, header, shares string, queue int) {
		rules := httpgate.QueueRules{Discipline: disc, PriorityHeader: header}
		if shares != "" {
			rules.ClassShares = []string{shares}
		}
		c, err := rules.Compile(queue, fieldNames)
		if err != nil {
			if !errors.Is(err, httpgate.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		g, err := admit.New(admit.Config{Name: "g", Capacity: 2, MaxWaiters: max(queue, 1)})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetQueueing(c.Policy); err != nil {
			t.Fatalf("%+v compiled to %+v, which the gate refuses: %v", rules, c.Policy, err)
		}
	})
}

// Queue rules as a config file or flags give them, checked and applied to
// a gate: the gate serves newest first and reads each request's class
// from X-Priority.
func ExampleQueueRules_Compile() {
	rules := httpgate.QueueRules{Discipline: "lifo", PriorityHeader: "X-Priority", ClassShares: []string{"sheddable=10%"}}
	c, err := rules.Compile(16, httpgate.RuleNames{Discipline: "--queue-discipline", PriorityHeader: "--priority-header",
		ClassShares: "--class-share", Queue: "--queue"})
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := admit.New(admit.Config{Name: "db", Capacity: 8, MaxWaiters: 16})
	_ = g.SetQueueing(c.Policy)
	handler := c.Classify(http.NotFoundHandler()) // then gate with g inside
	_ = handler
	fmt.Println(g.Discipline(), c.Policy.ClassShares)

	_, err = httpgate.QueueRules{Discipline: "codel"}.Compile(0, httpgate.RuleNames{Discipline: "--queue-discipline", Queue: "--queue"})
	fmt.Println(err)
	// Output:
	// lifo sheddable=0.1
	// --queue-discipline codel needs --queue: without a queue nothing waits
}
