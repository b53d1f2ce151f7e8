package static

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
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
