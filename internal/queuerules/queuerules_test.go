package queuerules_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/queuerules"
)

var fieldNames = queuerules.Names{Discipline: "queue_discipline", PriorityHeader: "priority_header", ClassShares: "class_shares", Queue: "queue"}

func TestRulesCompile(t *testing.T) {
	c, err := queuerules.Rules{Discipline: "LIFO", PriorityHeader: "X-Priority", ClassShares: []string{"sheddable=0.1", "critical=20%"}}.Compile(4, fieldNames)
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
	if c, err := (queuerules.Rules{}).Compile(0, fieldNames); err != nil || c.Classify != nil || c.Policy != (admit.Queueing{}) {
		t.Fatalf("zero rules: %+v, %v", c, err)
	}
}

func TestRulesErrorsNameTheRule(t *testing.T) {
	for _, tc := range []struct {
		rules queuerules.Rules
		queue int
		want  string
	}{
		{queuerules.Rules{Discipline: "stack"}, 4, `queue_discipline "stack": want fifo, lifo or codel`},
		{queuerules.Rules{Discipline: "codel"}, 0, "queue_discipline codel needs queue"},
		{queuerules.Rules{PriorityHeader: "X P"}, 4, `priority_header "X P"`},
		{queuerules.Rules{PriorityHeader: "X-P"}, 0, "priority_header needs queue"},
		{queuerules.Rules{PriorityHeader: "X-P", ClassShares: []string{"bulk=0.1"}}, 4, `class_shares: class share "bulk=0.1": unknown class`},
		{queuerules.Rules{ClassShares: []string{"sheddable=0.1"}}, 4, "class_shares needs priority_header"},
		{queuerules.Rules{PriorityHeader: "X-P", ClassShares: []string{"sheddable=0.6", "critical=0.6"}}, 4, "more than 1"},
	} {
		_, err := tc.rules.Compile(tc.queue, fieldNames)
		if !errors.Is(err, queuerules.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), queuerules.ErrInvalid.Error()) {
			t.Errorf("%+v queue %d: error %v; want ErrInvalid saying %q (without the sentinel's text)", tc.rules, tc.queue, err, tc.want)
		}
	}
}

// FuzzRules: compiled rules are accepted by a gate; a refusal wraps
// ErrInvalid; nothing panics.
func FuzzRules(f *testing.F) {
	f.Add("lifo", "X-Priority", "sheddable=0.1", 4)
	f.Add("codel", "", "", 0)
	f.Add("FIFO", "X P", "critical=2", 1)
	f.Fuzz(func(t *testing.T, disc, header, shares string, queue int) {
		rules := queuerules.Rules{Discipline: disc, PriorityHeader: header}
		if shares != "" {
			rules.ClassShares = []string{shares}
		}
		c, err := rules.Compile(queue, fieldNames)
		if err != nil {
			if !errors.Is(err, queuerules.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
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
func ExampleRules_Compile() {
	rules := queuerules.Rules{Discipline: "lifo", PriorityHeader: "X-Priority", ClassShares: []string{"sheddable=10%"}}
	c, err := rules.Compile(16, queuerules.Names{Discipline: "--queue-discipline", PriorityHeader: "--priority-header",
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

	_, err = queuerules.Rules{Discipline: "codel"}.Compile(0, queuerules.Names{Discipline: "--queue-discipline", Queue: "--queue"})
	fmt.Println(err)
	// Output:
	// lifo sheddable=0.1
	// --queue-discipline codel needs --queue: without a queue nothing waits
}
