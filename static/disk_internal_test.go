package static

import (
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"testing/iotest"
)

func TestReadWholeDetectsChangedSize(t *testing.T) {
	fsys := fstest.MapFS{"f": {Data: []byte("12345")}}
	read := func(size int64) ([]byte, error) {
		f, err := fsys.Open("f")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return readWhole(f, size)
	}
	if b, err := read(5); err != nil || string(b) != "12345" {
		t.Errorf("same size: %q, %v", b, err)
	}
	for _, size := range []int64{4, 6, 0} {
		if _, err := read(size); !errors.Is(err, errChanged) {
			t.Errorf("stat said %d bytes, file has 5: err %v, want errChanged", size, err)
		}
	}
	if _, _, err := openStat(fsys, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

// countingFile counts the Reads that reach the file.
type countingFile struct {
	fs.File
	reads int
}

func (c *countingFile) Read(p []byte) (int, error) {
	c.reads++
	return c.File.Read(p)
}

// A file of the size its stat said is read in one call: the read asks for
// one byte more and comes back short, which is the end of a regular file.
// A second read, that would only find the end, is a round trip of its own
// on FUSE or a network filesystem. A reader that answers in small pieces
// is still read whole.
func TestReadWholeReadsOnce(t *testing.T) {
	data := strings.Repeat("sluice ", 300)
	fsys := fstest.MapFS{"f": {Data: []byte(data)}}
	f, err := fsys.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cf := &countingFile{File: f}
	b, err := readWhole(cf, int64(len(data)))
	if err != nil || string(b) != data {
		t.Fatalf("readWhole: %d bytes, %v", len(b), err)
	}
	if cf.reads != 1 {
		t.Errorf("%d reads for a file of its stat's size, want 1", cf.reads)
	}
	g, err := fsys.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	b, err = readWhole(oneByteFile{File: g, r: iotest.OneByteReader(g)}, int64(len(data)))
	if err != nil || string(b) != data {
		t.Errorf("one byte at a time: %d bytes, %v; want the whole file", len(b), err)
	}
}

// oneByteFile answers every Read with at most one byte.
type oneByteFile struct {
	fs.File
	r io.Reader
}

func (o oneByteFile) Read(p []byte) (int, error) { return o.r.Read(p) }
