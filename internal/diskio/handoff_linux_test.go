package diskio_test

import (
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/diskio"
)

// While a read blocks, the other goroutines keep running, even with one
// P: the read hands its P to another thread first. Without that (an
// ordinary system call), the P waits for the runtime's monitor thread,
// which after a busy spell with nothing to take back looks only every
// 10 ms and must see the call twice: the goroutine beside the read
// resumes 10-20 ms late instead of within microseconds. The test keeps
// the process busy for 30 ms first, so that the monitor has slowed down,
// then blocks a read on an empty pipe that the poller does not watch (a
// blocking descriptor, as a disk's is) and times how long the goroutine
// that yielded to it waits to run again. The median of five trials must
// be under 3 ms.
func TestABlockedReadLeavesThePToOthers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var waits []time.Duration
	for range 5 {
		waits = append(waits, blockedReadWait(t))
	}
	slices.Sort(waits)
	t.Logf("waits beside a blocked read: %v", waits)
	if med := waits[len(waits)/2]; med > 3*time.Millisecond {
		t.Errorf("the goroutine beside a blocked read waited %v (median of %v), want under 3ms: the read kept its P", med, waits)
	}
}

func blockedReadWait(t *testing.T) time.Duration {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil { // blocking ends
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	defer r.Close()
	defer w.Close()

	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); { // busy: the monitor slows down
	}
	got := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := diskio.Read(r, b[:])
		got <- err
	}()
	start := time.Now()
	runtime.Gosched() // the reader runs now (it was made runnable next) and blocks
	wait := time.Since(start)
	if _, err := w.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("read: %v", err)
	}
	return wait
}
