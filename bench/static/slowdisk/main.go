// Command slowdisk mounts a directory again through FUSE as a disk of
// known capacity: every read that returns data takes a fixed service time
// on one of a fixed number of channels, and reads beyond the channels wait
// in the disk's own queue, in arrival order. So 16 channels and 20 ms give
// a disk that serves 800 reads a second, however it is asked.
//
// It exists so that two servers can be compared at the same scarce
// resource: `sluice serve` (whose disk gate guards the reads) and nginx
// (whose limit_conn guards the location) read the same files from the same
// mount, and neither can go faster than the disk. Files are opened with
// FUSE's direct I/O, so the kernel's page cache never answers a read in
// the disk's place; a read at or past the end of the file answers at once
// (a real disk knows a file's size without reading it). Names and
// attributes are cached by the kernel for an hour: only reads cost.
//
// Linux only, as root (it mounts with mount(2) itself, without fusermount):
//
//	slowdisk -src ./site -mnt /tmp/disk -service 20ms -channels 16
//
// It unmounts on SIGINT or SIGTERM and prints what the disk did.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// disk is the scarce resource: channels reads at a time, each taking
// service. Counters are for the exit report.
type disk struct {
	channels chan struct{}
	service  time.Duration

	reads   atomic.Int64 // reads that returned data (each took service)
	eofs    atomic.Int64 // reads at or past the end (free)
	waiting atomic.Int64 // reads waiting for a channel now
	maxWait atomic.Int64 // most reads ever waiting at once
}

func (d *disk) serve(read func()) {
	if w := d.waiting.Add(1); w > d.maxWait.Load() {
		d.maxWait.Store(w) // a racy maximum: a report, not a gate
	}
	d.channels <- struct{}{}
	d.waiting.Add(-1)
	time.Sleep(d.service)
	read()
	<-d.channels
}

// node is a loopback node whose files are opened slow and uncached.
type node struct {
	*fs.LoopbackNode
	disk *disk
}

// WrapChild makes every node under the root a node of the slow disk.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), disk: n.disk}
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, _, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{LoopbackFile: fh.(*fs.LoopbackFile), disk: n.disk}, fuse.FOPEN_DIRECT_IO, 0
}

// file reads through the disk; everything else is the loopback file's.
type file struct {
	*fs.LoopbackFile
	disk *disk
}

// PassthroughFd says no, so that the kernel never reads the backing file
// itself, around the disk's service time.
func (f *file) PassthroughFd() (int, bool) { return 0, false }

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var st fuse.AttrOut
	if errno := f.LoopbackFile.Getattr(ctx, &st); errno != 0 {
		return nil, errno
	}
	if uint64(off) >= st.Size {
		f.disk.eofs.Add(1)
		return fuse.ReadResultData(nil), 0
	}
	res, errno := fuse.ReadResult(nil), syscall.Errno(0)
	f.disk.reads.Add(1)
	f.disk.serve(func() { res, errno = f.LoopbackFile.Read(ctx, buf, off) })
	return res, errno
}

func main() {
	src := flag.String("src", "", "directory whose files the disk holds (required)")
	mnt := flag.String("mnt", "", "empty directory to mount the disk on (required)")
	service := flag.Duration("service", 20*time.Millisecond, "time each read that returns data takes")
	channels := flag.Int("channels", 16, "reads the disk serves at once; more wait in its queue")
	flag.Parse()
	if *src == "" || *mnt == "" || *service < 0 || *channels < 1 {
		fmt.Fprintln(os.Stderr, "slowdisk: -src and -mnt are required, -service must be >= 0 and -channels >= 1")
		os.Exit(2)
	}
	if err := run(*src, *mnt, *service, *channels); err != nil {
		fmt.Fprintln(os.Stderr, "slowdisk:", err)
		os.Exit(1)
	}
}

func run(src, mnt string, service time.Duration, channels int) error {
	d := &disk{channels: make(chan struct{}, channels), service: service}
	loop, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return fmt.Errorf("-src %s: %w", src, err)
	}
	root := &node{LoopbackNode: loop.(*fs.LoopbackNode), disk: d}
	hour := time.Hour
	server, err := fs.Mount(mnt, root, &fs.Options{
		EntryTimeout: &hour,
		AttrTimeout:  &hour,
		MountOptions: fuse.MountOptions{
			AllowOther:        true, // nginx's workers read as another user
			DirectMountStrict: true,
			FsName:            "slowdisk",
			Name:              "slowdisk",
		},
	})
	if err != nil {
		return fmt.Errorf("mount on %s (root and /dev/fuse needed): %w", mnt, err)
	}
	fmt.Printf("slowdisk: %s on %s, %d channels x %s (%.0f reads/s)\n", src, mnt, channels, service,
		float64(channels)/service.Seconds())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; _ = server.Unmount() }()
	server.Wait()
	fmt.Printf("slowdisk: %d reads, %d at the end of a file, at most %d waiting for a channel\n",
		d.reads.Load(), d.eofs.Load(), d.maxWait.Load())
	return nil
}
