// Package promtexttest holds the table of the Prometheus text rule
// (package promtext) for the tests of every reader: promtext itself, load
// and doctor each run the same cases and must reach the same verdict. Only
// tests import it.
//
// Every case uses only families both load and doctor read, so each reader
// has a verdict on all of them.
package promtexttest

import (
	_ "embed"
	"encoding/json"
)

//go:embed rule.json
var ruleJSON []byte

// Case is one text and the verdict the rule gives it.
type Case struct {
	Name string
	// Text is a /metrics page.
	Text string
	// Error is a substring of the error the rule gives the text; empty
	// when the text reads.
	Error string
	// Why the rule gives that verdict.
	Why string
}

// Cases returns the table, in a fresh slice. It panics if the embedded
// table does not decode: a broken table is a broken test binary.
func Cases() []Case {
	var t struct{ Cases []Case }
	if err := json.Unmarshal(ruleJSON, &t); err != nil || len(t.Cases) == 0 {
		panic("promtexttest: rule.json: no cases")
	}
	return t.Cases
}
