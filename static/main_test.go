package static_test

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunOnEngines(m, func(e string) { testEngine = e }))
}
