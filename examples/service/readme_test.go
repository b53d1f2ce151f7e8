package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's library example is an excerpt: it names a cache and a
// query it does not declare. This test puts it, as it stands in the
// README, into a program that declares them, builds that program against
// this module (through an overlay, so nothing is written into the tree)
// and runs it: a cache hit and a database read must both answer 200, and
// the database read must have passed through the gate. A README edit that
// no longer compiles, or no longer gates the read, fails here.
// Over a second: it compiles and links a program.
func TestReadmeExampleCompilesAndRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippet, ok := firstGoBlock(string(readme), "## Use it as a library")
	if !ok {
		t.Fatal("README.md has no ```go block under \"## Use it as a library\"")
	}
	program := `package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/promsluice"
)

func main() {
	cache := map[string]string{"hot": "cached"}
	query := func(ctx context.Context, id string) string { return "row " + id }
` + snippet + `
	srv := httptest.NewServer(http.DefaultServeMux)
	defer srv.Close()
	for _, id := range []string{"hot", "42"} {
		resp, err := http.Get(srv.URL + "/item/" + id)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d %s\n", id, resp.StatusCode, body)
	}
	st := db.Stats()
	fmt.Printf("gate %s offered %d admitted %d\n", db.Name(), st.Offered, st.Admitted)
	_ = metrics
	_ = time.Second
	_ = admit.Config{}
}
`
	// The program lives, in the overlay only, in a directory of this
	// module that does not exist on disk.
	dir, err := filepath.Abs("readme_example_overlay")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(src, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(tmp, "overlay.json")
	ov := `{"Replace":{` + quote(filepath.Join(dir, "main.go")) + `:` + quote(src) + `}}`
	if err := os.WriteFile(overlay, []byte(ov), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "readme-example")
	build := exec.Command("go", "build", "-overlay", overlay, "-o", bin, "./"+filepath.Base(dir))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the README's example does not compile: %v\n%s\nthe program:\n%s", err, out, program)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("the README's example failed: %v\n%s", err, out)
	}
	for _, want := range []string{"hot 200 cached", "42 200 row 42", "gate db offered 1 admitted 1"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the README's example printed:\n%s\nwant a line %q", out, want)
		}
	}
}

// firstGoBlock returns the body of the first ```go block after heading.
func firstGoBlock(doc, heading string) (string, bool) {
	_, rest, ok := strings.Cut(doc, heading)
	if !ok {
		return "", false
	}
	_, rest, ok = strings.Cut(rest, "```go\n")
	if !ok {
		return "", false
	}
	block, _, ok := strings.Cut(rest, "```")
	return block, ok
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
