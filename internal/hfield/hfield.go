// Package hfield holds a header as the list of its fields, in the order
// they came: what a proxy forwards from an upstream's answer to its
// client without building an http.Header between the two.
//
// A map costs a hash and a probe for every field going in, another for
// every lookup, and a sort on the way out (net/http writes a Header in
// name order); a forwarded answer needs none of that. Its framing fields
// are looked up a handful of times, each a scan of a dozen short
// strings, and the fields go out as they came. The names are kept in
// http.CanonicalHeaderKey's form, so a lookup is a plain comparison and
// the list turns into the Header it stands for without renaming
// (Header).
package hfield

import "net/http"

// Field is one header field: its name in canonical form and its value.
type Field struct {
	Name, Value string
}

// inline is how many fields a List holds without an allocation: most
// answers have fewer.
const inline = 16

// List is a header's fields in order. The zero List holds none; it
// stores its first fields in room of its own, so it must not be copied
// once it holds some (keep it in place, behind a pointer).
type List struct {
	fields []Field
	room   [inline]Field
}

// Reset empties l.
func (l *List) Reset() {
	// The strings of the last head go with it: a list that outgrew its
	// room left copies of its first fields there.
	n := len(l.fields)
	clear(l.fields)
	clear(l.room[:min(n, inline)])
	l.fields = l.room[:0]
}

// Add appends a field; name must be canonical.
func (l *List) Add(name, value string) {
	if l.fields == nil {
		l.fields = l.room[:0]
	}
	l.fields = append(l.fields, Field{name, value})
}

// Prepend puts a field first; name must be canonical.
func (l *List) Prepend(name, value string) {
	l.Add(name, value)
	copy(l.fields[1:], l.fields)
	l.fields[0] = Field{name, value}
}

// All returns the fields, in order. The slice is l's own: valid until l
// changes.
func (l *List) All() []Field { return l.fields }

// Len is how many fields l holds.
func (l *List) Len() int { return len(l.fields) }

// Get returns the value of the first field named name (canonical), or
// "".
func (l *List) Get(name string) string {
	v, _ := l.Lookup(name)
	return v
}

// Lookup returns the value of the first field named name (canonical)
// and whether there is one.
func (l *List) Lookup(name string) (string, bool) {
	for i := range l.fields {
		if l.fields[i].Name == name {
			return l.fields[i].Value, true
		}
	}
	return "", false
}

// Has reports whether l has a field named name (canonical).
func (l *List) Has(name string) bool {
	_, ok := l.Lookup(name)
	return ok
}

// Count is how many fields are named name (canonical).
func (l *List) Count(name string) int {
	n := 0
	for i := range l.fields {
		if l.fields[i].Name == name {
			n++
		}
	}
	return n
}

// DeleteFunc removes the fields for which drop reports true, keeping the
// others in order.
func (l *List) DeleteFunc(drop func(Field) bool) {
	kept := l.fields[:0]
	for _, f := range l.fields {
		if !drop(f) {
			kept = append(kept, f)
		}
	}
	clear(l.fields[len(kept):])
	l.fields = kept
}

// Delete removes every field named name (canonical).
func (l *List) Delete(name string) {
	l.DeleteFunc(func(f Field) bool { return f.Name == name })
}

// Header returns the fields as an http.Header: a name's values in the
// order they came.
func (l *List) Header() http.Header {
	h := make(http.Header, len(l.fields))
	for _, f := range l.fields {
		h[f.Name] = append(h[f.Name], f.Value)
	}
	return h
}
