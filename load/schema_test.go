package load

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// validateSchema checks doc against the subset of JSON Schema the report
// schema uses: type, properties, required, additionalProperties, items,
// enum, const, minimum, maximum, minLength, minItems, pattern and local
// $ref. It returns every violation, with its JSON path.
func validateSchema(root map[string]any, doc any) []string {
	var errs []string
	var walk func(s map[string]any, v any, path string)
	walk = func(s map[string]any, v any, path string) {
		if ref, ok := s["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/$defs/")
			def, ok := root["$defs"].(map[string]any)[name].(map[string]any)
			if !ok {
				errs = append(errs, path+": unknown $ref "+ref)
				return
			}
			walk(def, v, path)
			return
		}
		fail := func(format string, a ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, a...)) }
		if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
			fail("want const %v, got %v", c, v)
		}
		if e, ok := s["enum"].([]any); ok {
			found := false
			for _, x := range e {
				found = found || fmt.Sprint(x) == fmt.Sprint(v)
			}
			if !found {
				fail("%v not in enum %v", v, e)
			}
		}
		if t, ok := s["type"].(string); ok && !hasType(v, t) {
			fail("want %s, got %T", t, v)
			return
		}
		switch x := v.(type) {
		case map[string]any:
			props, _ := s["properties"].(map[string]any)
			if req, ok := s["required"].([]any); ok {
				for _, r := range req {
					if _, ok := x[r.(string)]; !ok {
						fail("missing required %q", r)
					}
				}
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if ps, ok := props[k].(map[string]any); ok {
					walk(ps, x[k], path+"."+k)
					continue
				}
				switch ap := s["additionalProperties"].(type) {
				case bool:
					if !ap {
						fail("unexpected property %q", k)
					}
				case map[string]any:
					walk(ap, x[k], path+"."+k)
				}
			}
		case []any:
			if n, ok := s["minItems"].(float64); ok && float64(len(x)) < n {
				fail("want at least %v items", n)
			}
			if it, ok := s["items"].(map[string]any); ok {
				for i, e := range x {
					walk(it, e, fmt.Sprintf("%s[%d]", path, i))
				}
			}
		case float64:
			if m, ok := s["minimum"].(float64); ok && x < m {
				fail("%v < minimum %v", x, m)
			}
			if m, ok := s["maximum"].(float64); ok && x > m {
				fail("%v > maximum %v", x, m)
			}
		case string:
			if n, ok := s["minLength"].(float64); ok && float64(len(x)) < n {
				fail("shorter than %v", n)
			}
			if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(x) {
				fail("%q does not match %s", x, p)
			}
		}
	}
	walk(root, doc, "$")
	return errs
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	}
	return false
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(SchemaJSON, &s); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	return s
}

func asJSON(t *testing.T, r *Report) any {
	t.Helper()
	b, err := marshalReport(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// realReport runs a short load with every feature on (profile, metrics,
// refusals, two windows) against a real server.
func realReport(t *testing.T) *Report {
	t.Helper()
	gs := &gatedServer{}
	srv := serve(t, gs.ServeHTTP)
	p, err := ParseProfile([]byte(`{"name":"p","cases":[{"name":"c","qps_floor":1,"max_refusal_rate":0.8}]}`))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := Stepped([]float64{100, 300}, 200*time.Millisecond) // phases, too
	if err != nil {
		t.Fatal(err)
	}
	meta := Meta{Tool: Tool{Module: "m", Version: "v", Go: "go"}, Command: []string{"sluice", "load"},
		BinarySHA256: strings.Repeat("ab", 32), Profile: &ProfileRef{Path: "p.json", Case: "c", Profile: p}}
	r, err := Run(context.Background(), "load", meta, []Config{{
		Targets: []Target{{URL: srv.URL + "/x", Body: []byte("b"), Method: "POST"}}, Shape: steps,
		Windows: 2, MetricsURL: srv.URL + "/metrics", Workers: 4,
		MaxLag: time.Second, MaxCPU: 2, // a verdict test, not a test of this busy machine's scheduler
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Over a second: the report comes from a real run (realReport).
func TestReportsValidateAgainstSchema(t *testing.T) {
	schema := loadSchema(t)
	r := realReport(t)
	if errs := validateSchema(schema, asJSON(t, r)); len(errs) > 0 {
		t.Fatalf("report violates the schema:\n%s", strings.Join(errs, "\n"))
	}
	other := *r // another driver's run of the same shape
	other.Started = r.Started.Add(time.Millisecond)
	m, err := Merge(Meta{Command: []string{"sluice", "report", "merge"}}, []*Report{r, &other})
	if err != nil {
		t.Fatal(err)
	}
	m.Sources = []Source{{File: "a.json", Started: r.Started}}
	if errs := validateSchema(schema, asJSON(t, m)); len(errs) > 0 {
		t.Fatalf("merged report violates the schema:\n%s", strings.Join(errs, "\n"))
	}
	// The validator is not a rubber stamp.
	doc := asJSON(t, r).(map[string]any)
	doc["schema"] = "sluice/load-report/v0"
	delete(doc, "verdict")
	doc["steps"].([]any)[0].(map[string]any)["mode"] = "sideways"
	doc["steps"].([]any)[0].(map[string]any)["windows"].([]any)[0].(map[string]any)["counts"].(map[string]any)["ok"] = -1.0
	doc["surprise"] = true
	errs := validateSchema(schema, doc)
	for _, want := range []string{"$.schema", `"verdict"`, "sideways", "$.steps[0].windows[0].counts.ok", `"surprise"`} {
		if !strings.Contains(strings.Join(errs, "\n"), want) {
			t.Errorf("tampered report: no error mentions %s; got %v", want, errs)
		}
	}
}

// TestSchemaCoversStruct keeps the schema and the Go types in step: every
// JSON key a full report carries is a schema property (additionalProperties
// is false nearly everywhere, so the test above would catch a new field),
// and every schema property of the top level exists in the struct.
func TestSchemaCoversStruct(t *testing.T) {
	schema := loadSchema(t)
	props := schema["properties"].(map[string]any)
	doc := asJSON(t, realReport(t)).(map[string]any)
	for k := range props {
		if _, ok := doc[k]; !ok && k != "aborted" && k != "sources" {
			t.Errorf("schema property %q not in a full report", k)
		}
	}
}
