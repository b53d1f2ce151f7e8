// Command server serves a directory for the static-file benchmarks, either
// with package static (the same handler `sluice serve` mounts), with
// net/http.FileServer (the peer it is compared with), or as "floor": a
// handler that writes one preloaded file from memory with nothing else,
// the least any net/http handler can cost. The scripts in bench/scripts
// start it; it exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/static"
)

func main() {
	mode := flag.String("mode", "sluice", "sluice (package static), fileserver (net/http.FileServer) or floor (one preloaded file, -floor-file)")
	floorFile := flag.String("floor-file", "page.html", "floor mode: the file under -root to preload and answer every request with")
	addr := flag.String("addr", "127.0.0.1:0", "listen address; the chosen one is printed on stdout")
	root := flag.String("root", "", "directory to serve (sluice mode: empty = demo site)")
	workLimit := flag.Int64("work-limit", 16, "disk slots (sluice mode)")
	scope := flag.String("gate-scope", "disk", "disk or request (sluice mode)")
	slowRead := flag.Duration("slow-read", 0, "sleep this long in every Read of a file (sluice mode): a slow disk without FUSE")
	flag.Parse()
	if err := run(*mode, *addr, *root, *floorFile, *workLimit, *scope, *slowRead); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func run(mode, addr, root, floorFile string, workLimit int64, scopeName string, slowRead time.Duration) error {
	var h http.Handler
	switch mode {
	case "sluice":
		sc, err := static.ParseScope(scopeName)
		if err != nil {
			return err
		}
		cfg := static.Config{Root: root, WorkLimit: workLimit, Scope: sc}
		if slowRead > 0 {
			r, err := os.OpenRoot(root)
			if err != nil {
				return err
			}
			defer r.Close()
			cfg.Root, cfg.FS = "", slowFS{r.FS(), slowRead}
		}
		sh, err := static.New(cfg)
		if err != nil {
			return err
		}
		defer sh.Close()
		h = sh
	case "fileserver":
		r, err := os.OpenRoot(root)
		if err != nil {
			return err
		}
		defer r.Close()
		h = http.FileServerFS(r.FS())
	case "floor":
		r, err := os.OpenRoot(root)
		if err != nil {
			return err
		}
		body, err := r.ReadFile(floorFile)
		r.Close()
		if err != nil {
			return err
		}
		ctype := []string{"text/html; charset=utf-8"}
		h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header()["Content-Type"] = ctype
			w.Write(body)
		})
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// slowFS sleeps in every Read: the static.Config.FS hook for a slow disk.
// Stat stays fast (the handler never gates it).
type slowFS struct {
	fs.FS
	delay time.Duration
}

func (s slowFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(s.FS, name) }

func (s slowFS) Open(name string) (fs.File, error) {
	f, err := s.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return slowFile{f, s.delay}, nil
}

type slowFile struct {
	fs.File
	delay time.Duration
}

func (f slowFile) Read(p []byte) (int, error) {
	time.Sleep(f.delay)
	return f.File.Read(p)
}

func (f slowFile) Seek(off int64, whence int) (int64, error) {
	return f.File.(io.Seeker).Seek(off, whence)
}
