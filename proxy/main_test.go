package proxy

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// TestMain runs the package's tests once per HTTP/1.1 engine: front
// serves the proxy with net/http, then with sluice's engine and the
// proxy's fast path.
func TestMain(m *testing.M) {
	os.Exit(testutil.RunOnEngines(m, func(e string) { testEngine = e }))
}
