package demo

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing/fstest"
	"time"
)

// maxCachedFileSize is the largest file the demo's cache keeps. Hot files
// are smaller, cold files larger, so every request for a cold file reads
// the disk and every request for a hot file (after the first) does not.
const maxCachedFileSize = 4 << 10

// coldFiles is how many distinct cold files the site holds; requests
// cycle through them.
const coldFiles = 16

// site is the demo's file tree: a few small pages that the cache keeps
// (hot) and larger archive files that it never keeps (cold).
type site struct {
	files fstest.MapFS
	hot   []string // URL paths
	cold  []string
}

func newSite() *site {
	mod := time.Unix(1_700_000_000, 0)
	s := &site{files: fstest.MapFS{}}
	page := func(title string, n int) []byte {
		return []byte("<!doctype html><title>" + title + "</title>\n" + strings.Repeat("<p>sluice demo page.</p>\n", n))
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"index.html", page("home", 40)},
		{"about.html", page("about", 30)},
		{"style.css", []byte(strings.Repeat("p { margin: 0 0 1em; }\n", 40))},
		{"docs/index.html", page("docs", 60)},
	} {
		s.files[f.name] = &fstest.MapFile{Data: f.data, ModTime: mod}
		s.hot = append(s.hot, "/"+f.name)
	}
	cold := []byte(strings.Repeat("archived log line, read from disk every time\n", (2*maxCachedFileSize)/45+1))
	for i := range coldFiles {
		name := fmt.Sprintf("archive/%02d.log", i)
		s.files[name] = &fstest.MapFile{Data: cold, ModTime: mod}
		s.cold = append(s.cold, "/"+name)
	}
	return s
}

// Disk is the model of the slow disk behind the cold files. The zero value
// is a valid default: 4 channels, 40 ms a read, so the disk completes
// about 100 reads a second and a read beyond its parallelism waits in the
// disk's own queue.
type Disk struct {
	// Channels is how many reads the disk serves at once; more wait for a
	// channel. Zero means 4; negative is an error.
	Channels int
	// Service is how long one read takes once it has a channel. Zero
	// means 40 ms; negative is an error.
	Service time.Duration
}

func (d Disk) withDefaults() Disk {
	if d.Channels == 0 {
		d.Channels = 4
	}
	if d.Service == 0 {
		d.Service = 40 * time.Millisecond
	}
	return d
}

// slowDisk is an fs.FS whose files' first Read waits for one of a fixed
// number of channels and then sleeps the service time: one disk operation
// per file read, however many Read calls the reader makes. Stat is
// immediate (metadata is in memory on a real server too, and static never
// gates it). It is safe for concurrent use.
type slowDisk struct {
	fsys     fs.FS
	service  time.Duration
	channels chan struct{}
	mu       sync.Mutex
	reads    int64 // disk operations done (guarded by mu)
}

func newSlowDisk(fsys fs.FS, d Disk) *slowDisk {
	return &slowDisk{fsys: fsys, service: d.Service, channels: make(chan struct{}, d.Channels)}
}

func (d *slowDisk) Stat(name string) (fs.FileInfo, error) { return fs.Stat(d.fsys, name) }

func (d *slowDisk) Open(name string) (fs.File, error) {
	f, err := d.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	return &slowFile{File: f, disk: d}, nil
}

// Reads returns the number of disk operations done so far.
func (d *slowDisk) Reads() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reads
}

func (d *slowDisk) read() {
	d.channels <- struct{}{}
	time.Sleep(d.service)
	<-d.channels
	d.mu.Lock()
	d.reads++
	d.mu.Unlock()
}

type slowFile struct {
	fs.File
	disk *slowDisk
	done bool // the disk operation has happened; a file is read by one goroutine
}

func (f *slowFile) Read(p []byte) (int, error) {
	if !f.done {
		f.done = true
		f.disk.read()
	}
	return f.File.Read(p)
}

func (f *slowFile) Seek(off int64, whence int) (int64, error) {
	s, ok := f.File.(io.Seeker)
	if !ok {
		return 0, fmt.Errorf("demo: %T cannot seek", f.File)
	}
	return s.Seek(off, whence)
}
