// Package redistest runs a real redis-server on a free loopback port for
// tests, and can kill, restart and slow it to inject faults.
//
// Usage:
//
//	srv := redistest.Start(t) // skips without redis-server, fails under CI
//	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
//
// The server is stopped when the test ends. Without a redis-server binary
// on PATH the test is skipped with a message, except when the environment
// variable CI is set: there a missing server is a failure, so CI can never
// pass by skipping the fleet tests.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process. Its methods are safe for concurrent
// use.
type Server struct {
	t    testing.TB
	bin  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts a redis-server on a free 127.0.0.1 port with persistence
// off, and registers its stop with t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found on PATH and CI is set: install the redis-server package (.ci/run does)")
		}
		t.Skip("redis-server not found on PATH: install the Debian package redis-server to run the fleet tests")
	}
	s := &Server{t: t, bin: bin}
	var lastErr error
	for range 5 { // a free port can be taken between probe and bind
		s.port = freePort(t)
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: %v", lastErr)
	return nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns a redis:// URL for database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

func (s *Server) start() error {
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var log []string
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if len(log) < 50 {
				log = append(log, line)
			}
			if !sent && strings.Contains(line, "Ready to accept connections") {
				ready <- nil
				sent = true
			}
		}
		if !sent {
			ready <- fmt.Errorf("redis-server on port %d exited before it was ready:\n%s", s.port, strings.Join(log, "\n"))
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			_ = cmd.Wait()
			return err
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("redis-server on port %d not ready after 10s", s.port)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	return nil
}

// Kill stops the server with SIGKILL and waits for it to exit: clients see
// their connections reset and new connections refused.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// Restart starts the server again on the same port after Kill. Its data is
// gone (persistence is off), as after a crash without a disk.
func (s *Server) Restart() {
	s.t.Helper()
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart: %v", err)
}

// Stop kills the server if it runs. It is idempotent.
func (s *Server) Stop() { s.Kill() }

// Pause stops the server with SIGSTOP: connections stay open and new ones
// are accepted by the kernel, but nothing is answered until Resume, as
// when Redis hangs or its host stalls. It does nothing if the server is
// not running.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT; what clients sent in the
// meantime is answered then.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
