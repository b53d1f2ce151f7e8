package flow_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(rapidMain{m}) }

// rapidMain keeps rapid from writing failure files into testdata.
type rapidMain struct{ m *testing.M }

func (r rapidMain) Run() int { return testutil.RapidMain(r.m, 0) }
