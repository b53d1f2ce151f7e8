package server_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/internal/promtext"
)

// TestMetricsPageNamesAreListed: the admin /metrics page, read over a real
// socket, exports the families internal/metricname lists for the server,
// every sluice family on it is listed there or under promsluice, and the
// whole page reads under the rule load and doctor read it with.
func TestMetricsPageNamesAreListed(t *testing.T) {
	f := start(t, admit.Config{Capacity: 1}, nil)
	page := f.mustGet(t, f.admin+"/metrics")
	if page.status != 200 {
		t.Fatalf("/metrics: %+v", page)
	}
	all := append(append(metricname.Promsluice(), metricname.Server()...), metricname.NotExported()...)
	fams, err := promtext.Parse(strings.NewReader(page.body), all...)
	if err != nil {
		t.Fatalf("the page does not read under the rule: %v", err)
	}
	for _, want := range append(metricname.Server(), metricname.Family{Name: metricname.ProcessCPUSeconds}) {
		if len(fams[want.Name]) == 0 {
			t.Errorf("/metrics lacks %s", want.Name)
		}
	}
	listed := map[string]bool{}
	for _, f := range all {
		listed[f.Name] = true
	}
	for line := range strings.SplitSeq(page.body, "\n") {
		name, ok := strings.CutPrefix(line, "# TYPE sluice_")
		if name, _, _ = strings.Cut(name, " "); ok && !listed["sluice_"+name] {
			t.Errorf("/metrics exports sluice_%s, which internal/metricname does not list", name)
		}
	}
}
