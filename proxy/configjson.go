package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/sluicehq/sluice/internal/ratespec"
)

// decodeRules decodes a config file's one object, each route on its own,
// so that an error names the route it is in (its index and name) and the
// field, in words rather than Go's type names.
func decodeRules(dec *json.Decoder) (Rules, error) {
	var raw struct {
		Routes    []json.RawMessage `json:"routes"`
		Upstreams []string          `json:"upstreams,omitempty"`
	}
	if err := dec.Decode(&raw); err != nil {
		return Rules{}, describeJSONError(err)
	}
	rules := Rules{Upstreams: raw.Upstreams}
	if raw.Routes != nil {
		rules.Routes = make([]Route, 0, len(raw.Routes))
	}
	for i, m := range raw.Routes {
		rd := json.NewDecoder(bytes.NewReader(m))
		rd.DisallowUnknownFields()
		var rt Route
		if err := rd.Decode(&rt); err != nil {
			var named struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(m, &named) // best effort: the name, if it is a string
			return Rules{}, fmt.Errorf("route %d (%q): %v", i, named.Name, describeJSONError(err))
		}
		rules.Routes = append(rules.Routes, rt)
	}
	return rules, nil
}

// UnmarshalJSON reads a route quota. Its rate is tokens per second, a
// number (5, 0.5) or written as --quota writes it: "100/s", "600/m",
// "5/h", "3/10s". Unknown fields are refused, as everywhere in the file.
func (q *RouteQuota) UnmarshalJSON(b []byte) error {
	type Fields RouteQuota // RouteQuota without this method (an upper-case name, which error paths leave out)
	var raw struct {
		Fields
		Rate json.RawMessage `json:"rate"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("quota: %v", describeJSONError(err))
	}
	*q = RouteQuota(raw.Fields)
	if len(raw.Rate) == 0 || string(raw.Rate) == "null" {
		return nil // no rate: the route's check says it is missing
	}
	if err := json.Unmarshal(raw.Rate, &q.Rate); err == nil {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw.Rate, &s); err != nil {
		return fmt.Errorf("quota: rate %s: want tokens per second, a number (5) or a rate such as \"100/s\"", raw.Rate)
	}
	r, err := ratespec.Parse(s)
	if err != nil {
		return fmt.Errorf("quota: rate %q: %v", s, err)
	}
	q.Rate = r
	return nil
}

// describeJSONError words a decoding error of encoding/json for a person
// editing the file: the field and what it wants instead of Go's types.
func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// The path has the JSON names, and the Go names of embedded
		// structs (Queueing), which the file does not know: those go.
		var parts []string
		for p := range strings.SplitSeq(te.Field, ".") {
			if p != "" && !unicode.IsUpper(rune(p[0])) {
				parts = append(parts, p)
			}
		}
		field := strings.Join(parts, ".")
		if field == "" {
			field = "the file"
		}
		return fmt.Errorf("%s: want %s, got %s", field, jsonKind(te.Type), jsonValue(te.Value))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names what a Go type reads from JSON.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list [...] of " + strings.TrimPrefix(strings.TrimPrefix(jsonKind(t.Elem()), "a "), "an ") + "s"
	case reflect.Struct, reflect.Map:
		return "an object {...}"
	}
	return "another kind of value"
}

// jsonValue names the JSON value a decoder found ("string", "number 1.5").
func jsonValue(v string) string {
	switch v {
	case "string", "number", "object":
		return map[string]string{"string": "a string", "number": "a number", "object": "an object"}[v]
	case "bool":
		return "true or false"
	case "array":
		return "a list"
	}
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return "the number " + n
	}
	return v
}
