package lab_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/sluice/internal/lab"
)

func Example() {
	l, _ := lab.New(lab.Config{})
	defer l.Close()
	srv := httptest.NewServer(l.Handler())
	defer srv.Close()

	resp, _ := http.Get(srv.URL + "/state")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(string(b))
	// Output:
	// {"active":0,"admitted":0,"rejected":0,"completed":0}
}
