package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/sluicehq/sluice/proxy"
)

// A proxy with a route whose clients may each send one request per
// second: the second request in a row is refused with 429, naming the
// route's quota.
func ExampleNew() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	p, err := proxy.New(proxy.Config{
		Upstreams: []*url.URL{u},
		Routes: []proxy.Route{{Name: "api", PathPrefix: "/api/",
			Quota: &proxy.RouteQuota{Rate: 1, Burst: 1, Key: "header:X-Api-Key"}}},
	})
	if err != nil {
		panic(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, front.URL+"/api/items", nil)
		req.Header.Set("X-Api-Key", "alice")
		resp, err := front.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	front.Client().CloseIdleConnections()
	p.Close()
	// Output:
	// 200 hello
	// 429 {"error":"RATE_LIMITED","gate":"api-quota","reason":"rate"}
}

// A route whose gate serves its queue newest first and reads each
// request's class from X-Priority, as /state shows it; a discipline
// without a queue is a configuration error that names the route.
func ExampleQueueing() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	p, err := proxy.New(proxy.Config{
		Upstreams: []*url.URL{u},
		Routes: []proxy.Route{{Name: "search", PathPrefix: "/search", MaxInflight: 4, Queue: 8,
			Queueing: proxy.Queueing{Discipline: "lifo", PriorityHeader: "X-Priority", ClassShares: []string{"sheddable=0.25"}}}},
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	g := p.State().Routes[0].Gate
	fmt.Println(g.Discipline, g.PriorityHeader, g.Classes[3].Class, g.Classes[3].Share)

	_, err = proxy.New(proxy.Config{Upstreams: []*url.URL{u},
		Routes: []proxy.Route{{Name: "bad", MaxInflight: 4, Queueing: proxy.Queueing{Discipline: "lifo"}}}})
	fmt.Println(err)
	// Output:
	// lifo X-Priority sheddable 0.25
	// proxy: invalid config: route 0 ("bad"): queue_discipline lifo needs queue: without a queue nothing waits
}
