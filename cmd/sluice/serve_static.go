package main

import (
	"flag"
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice/admit"
)

// staticOptions are the `sluice serve` flags that configure the static-file
// handler. This file belongs to the static-files work (issue 4); until it
// lands, serve answers every request with 501.
type staticOptions struct{}

// addStaticFlags registers the static-file flags on fs.
func addStaticFlags(fs *flag.FlagSet) *staticOptions { return &staticOptions{} }

// build returns the handler to mount on the main listener, the gates it
// uses (for /metrics and /state), and a cleanup function.
func (o *staticOptions) build(logger *slog.Logger) (http.Handler, []*admit.Gate, func(), error) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "static files not built yet", http.StatusNotImplemented)
	})
	return h, nil, func() {}, nil
}
