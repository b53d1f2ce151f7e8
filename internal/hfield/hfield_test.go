package hfield

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
)

func names(l *List) []string {
	var out []string
	for _, f := range l.All() {
		out = append(out, f.Name+"="+f.Value)
	}
	return out
}

func TestListKeepsTheOrder(t *testing.T) {
	var l List
	if l.Len() != 0 || l.Get("X-A") != "" {
		t.Fatal("the zero List holds fields")
	}
	l.Add("X-B", "2")
	l.Add("X-A", "1")
	l.Add("Content-Type", "text/plain")
	l.Add("X-A", "0")
	if got, want := names(&l), []string{"X-B=2", "X-A=1", "Content-Type=text/plain", "X-A=0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	if v, ok := l.Lookup("X-A"); v != "1" || !ok {
		t.Errorf("Lookup X-A = %q %v, want the first value", v, ok)
	}
	if _, ok := l.Lookup("x-a"); ok {
		t.Error("Lookup matched a name that is not canonical")
	}
	if !l.Has("X-B") || l.Has("X-C") {
		t.Errorf("Has X-B %v, X-C %v", l.Has("X-B"), l.Has("X-C"))
	}
	if l.Count("X-A") != 2 || l.Count("X-C") != 0 {
		t.Errorf("Count X-A %d, X-C %d", l.Count("X-A"), l.Count("X-C"))
	}
	if h, want := l.Header(), (http.Header{"X-B": {"2"}, "X-A": {"1", "0"}, "Content-Type": {"text/plain"}}); !reflect.DeepEqual(h, want) {
		t.Errorf("Header %v, want %v", h, want)
	}
	l.Prepend("Ratelimit-Policy", "p")
	l.Delete("X-A")
	if got, want := names(&l), []string{"Ratelimit-Policy=p", "X-B=2", "Content-Type=text/plain"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after Prepend and Delete %v, want %v", got, want)
	}
	l.DeleteFunc(func(f Field) bool { return f.Value == "2" })
	if got, want := names(&l), []string{"Ratelimit-Policy=p", "Content-Type=text/plain"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after DeleteFunc %v, want %v", got, want)
	}
	l.Reset()
	if l.Len() != 0 || l.Get("Content-Type") != "" {
		t.Fatalf("after Reset %v", names(&l))
	}
}

// A list longer than its own room grows, and a Reset after it starts
// again in the room, with nothing of the last head left in it.
func TestListPastItsRoom(t *testing.T) {
	var l List
	var want []string
	for i := range 3 * inline {
		l.Add(fmt.Sprintf("X-%d", i), fmt.Sprint(i))
		want = append(want, fmt.Sprintf("X-%d=%d", i, i))
	}
	l.Prepend("First", "f")
	want = append([]string{"First=f"}, want...)
	if got := names(&l); !reflect.DeepEqual(got, want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	l.Reset()
	if &l.All()[:1][0] != &l.room[0] {
		t.Error("Reset did not return to the list's own room")
	}
	for i, f := range l.room {
		if f != (Field{}) {
			t.Fatalf("room[%d] still holds %v after Reset", i, f)
		}
	}
	l.Add("A", "1")
	l.Add("B", "2")
	l.Delete("A")
	if l.room[1] != (Field{}) {
		t.Errorf("a deleted field's strings stay in the room: %v", l.room[1])
	}
}

func BenchmarkListBuildAndLookup(b *testing.B) {
	var l List
	b.ReportAllocs()
	for b.Loop() {
		l.Reset()
		for _, n := range [...]string{"Content-Type", "Content-Length", "Date", "Cache-Control", "Etag", "Last-Modified", "Vary", "Server", "X-Request-Id"} {
			l.Add(n, "v")
		}
		if l.Get("Transfer-Encoding") != "" || l.Count("Content-Length") != 1 {
			b.Fatal("lookup")
		}
	}
}
