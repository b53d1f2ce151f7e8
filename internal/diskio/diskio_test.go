package diskio_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/diskio"
)

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// A regular file reads whole, from where its offset stands, and ends with
// io.EOF, whatever the size of the reads.
func TestReadsARegularFile(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16,000 bytes: several pages
	name := writeFile(t, data)
	for _, size := range []int{1, 7, 512, 4096, 20000} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		buf := make([]byte, size)
		for {
			n, err := diskio.Read(f, buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("reads of %d: %v", size, err)
			}
			if n == 0 {
				t.Fatalf("reads of %d: 0 bytes without io.EOF", size)
			}
		}
		f.Close()
		if !bytes.Equal(got, data) {
			t.Errorf("reads of %d: %d bytes, want the file's %d", size, len(got), len(data))
		}
	}
}

func TestReadGoesOnFromTheOffset(t *testing.T) {
	f, err := os.Open(writeFile(t, []byte("hello, disk")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(diskio.Reader{File: f})
	if err != nil || string(b) != "disk" {
		t.Errorf("after a seek to 7: %q, %v; want \"disk\"", b, err)
	}
	if n, err := diskio.Read(f, make([]byte, 4)); n != 0 || err != io.EOF {
		t.Errorf("at the end: %d, %v; want 0, io.EOF", n, err)
	}
	if n, err := diskio.Read(f, nil); n != 0 || err != nil {
		t.Errorf("an empty buffer: %d, %v; want 0, nil", n, err)
	}
}

func TestReadOfAClosedFileFails(t *testing.T) {
	f, err := os.Open(writeFile(t, []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n, err := diskio.Read(f, make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrClosed) {
		t.Errorf("closed file: %d, %v; want 0 and os.ErrClosed", n, err)
	}
}

// A descriptor the poller watches (a pipe from os.Pipe is non-blocking)
// waits there for its bytes instead of failing with EAGAIN.
func TestReadOfAPollableFileWaitsForData(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan struct{})
	// late, so that the first read finds the pipe empty
	time.AfterFunc(20*time.Millisecond, func() {
		defer close(done)
		defer w.Close()
		w.Write([]byte("late bytes"))
	})
	b, err := io.ReadAll(diskio.Reader{File: r})
	<-done
	if err != nil || string(b) != "late bytes" {
		t.Errorf("pipe: %q, %v", b, err)
	}
}
