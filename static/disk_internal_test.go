package static

import (
	"errors"
	"testing"
	"testing/fstest"
)

func TestReadWholeDetectsChangedSize(t *testing.T) {
	fsys := fstest.MapFS{"f": {Data: []byte("12345")}}
	if b, err := readWhole(fsys, "f", 5); err != nil || string(b) != "12345" {
		t.Errorf("same size: %q, %v", b, err)
	}
	for _, size := range []int64{4, 6, 0} {
		if _, err := readWhole(fsys, "f", size); !errors.Is(err, errChanged) {
			t.Errorf("stat said %d bytes, file has 5: err %v, want errChanged", size, err)
		}
	}
	if _, err := readWhole(fsys, "missing", 1); err == nil {
		t.Error("missing file: no error")
	}
}
