package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestProxyRequestPathFlagsExitTwo(t *testing.T) {
	up := []string{"--upstream", "http://127.0.0.1:9"}
	for _, tc := range []struct {
		name string
		args []string
		envs map[string]string
		want string
	}{
		{"timeout too short", append(up, "--timeout", "1ns"), nil, "--timeout 1ns"},
		{"idle timeout zero", append(up, "--upstream-idle-timeout", "0s"), nil, "--upstream-idle-timeout 0s"},
		{"tunnel idle too long", append(up, "--tunnel-idle-timeout", "2562047h"), nil, "--tunnel-idle-timeout"},
		{"no tunnels", append(up, "--max-tunnels", "0"), nil, "--max-tunnels 0"},
		{"bad timeout twin", up, map[string]string{"SLUICE_TIMEOUT": "soon"}, "SLUICE_TIMEOUT"},
		{"h2c upgrade route", append(up, "--config", writeRules(t, `{"routes":[{"name":"ws","upgrades":["websocket","H2C"]}]}`)), nil, "h2c is never tunnelled"},
		{"streaming without a gate", append(up, "--config", writeRules(t, `{"routes":[{"name":"sse","streaming":true}]}`)), nil, "streaming needs max_inflight"},
		{"route named tunnels", append(up, "--config", writeRules(t, `{"routes":[{"name":"tunnels"}]}`)), nil, `"tunnels" used twice (or reserved)`},
		{"quota named tunnels", append(up, "--quota", "name=tunnels,rate=1/s"), nil, "--quota name=tunnels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runSubcommand(context.Background(), runProxy, tc.envs, tc.args...)
			if code != exitUsage || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output %q; want %d and %q", code, out, exitUsage, tc.want)
			}
		})
	}
}

// rawExchange writes raw to addr and reads one answer.
func rawExchange(t *testing.T, addr, raw string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, raw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("answer to %q: %v", raw, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// completedTotal reads sluice_admission_completed_total for the upstream
// gate and outcome from a /metrics page (0 when absent).
func completedTotal(metrics, outcome string) string {
	re := regexp.MustCompile(`(?m)^sluice_admission_completed_total\{gate="upstream",kind="default",outcome="` + outcome + `"\} (\S+)$`)
	if m := re.FindStringSubmatch(metrics); m != nil {
		return m[1]
	}
	return "0"
}

// TestProxyOutcomesSayWhatHappened runs `sluice proxy` with its listener's
// body and send timeouts and checks, on /metrics, how each way an answer
// can go wrong completes: a stalled request body is 408 with the JSON
// contract and dropped, a malformed one 400 and dropped, an answer the
// upstream cuts short an error, one the client stops reading canceled;
// none is a panic.
func TestProxyOutcomesSayWhatHappened(t *testing.T) {
	big := strings.Repeat("x", 32<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cut":
			w.Header().Set("Content-Length", "100000")
			_, _ = io.WriteString(w, "partial")
			_ = http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler) // the upstream drops the connection mid-answer
		case "/big":
			_, _ = io.WriteString(w, big)
		default:
			_, _ = io.Copy(io.Discard, r.Body)
		}
	}))
	defer up.Close()
	px := startProxy(t, nil, "--upstream", up.URL, "--body-timeout", "200ms", "--send-timeout", "200ms")

	code, body := rawExchange(t, px.addr, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n01234")
	if code != http.StatusRequestTimeout || !strings.Contains(body, `"error":"REQUEST_TIMEOUT"`) {
		t.Fatalf("stalled body: %d %q; want 408 REQUEST_TIMEOUT", code, body)
	}
	code, body = rawExchange(t, px.addr, "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\nhello\r\n0\r\n\r\n")
	if code != http.StatusBadRequest || !strings.Contains(body, `"error":"BAD_REQUEST"`) {
		t.Fatalf("malformed chunked body: %d %q; want 400 BAD_REQUEST", code, body)
	}
	if resp, err := http.Get("http://" + px.addr + "/cut"); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("an answer cut short upstream reached the client whole")
		}
	}
	c, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprint(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n") // and never read: the send timeout cuts it

	var metrics string
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + px.admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metrics = string(b)
		if completedTotal(metrics, "canceled") == "1" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Close()
	for outcome, want := range map[string]string{"dropped": "2", "error": "1", "canceled": "1", "panic": "0"} {
		if got := completedTotal(metrics, outcome); got != want {
			t.Errorf("completed{outcome=%q} = %s, want %s:\n%s", outcome, got, want, grepLines(metrics, "completed_total"))
		}
	}
	if !strings.Contains(metrics, `sluice_breaker_state{breaker="upstream-breaker",state="closed"} 1`) {
		t.Errorf("client faults moved the breaker:\n%s", grepLines(metrics, "breaker_state"))
	}
	http.DefaultClient.CloseIdleConnections()
	px.stop(t)
}

// TestProxyTunnelCutAtShutdown runs `sluice proxy` with a route that
// allows WebSockets: the tunnel holds the tunnels gate (in /state and
// /metrics) and not the upstream gate, and at shutdown it is cut, the log
// says how many were, and the shutdown is not called clean.
func TestProxyTunnelCutAtShutdown(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "upgrade expected", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = brw.Flush()
		_, _ = io.Copy(conn, brw)
	}))
	defer up.Close()
	rules := writeRules(t, `{"routes":[{"name":"ws","path":"/ws","upgrades":["websocket"]}]}`)
	px := startProxy(t, nil, "--upstream", up.URL, "--config", rules)

	c, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	fmt.Fprint(c, "hello")
	buf := make([]byte, 5)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	r, err := http.Get("http://" + px.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	metrics := string(b)
	if !strings.Contains(metrics, `sluice_admission_inflight{gate="tunnels"} 1`) || !strings.Contains(metrics, `sluice_admission_inflight{gate="upstream"} 0`) {
		t.Fatalf("one tunnel open: want the tunnels gate holding it, not the upstream gate:\n%s", grepLines(metrics, "admission_inflight"))
	}
	px.cancel()
	if code := <-px.done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, px.out.String())
	}
	if rec := logRecord(t, px.out, "cut upgrade tunnels at shutdown"); fmt.Sprint(rec["tunnels"]) != "1" {
		t.Fatalf("shutdown log %v; want tunnels=1", rec)
	}
	if strings.Contains(px.out.String(), "shut down cleanly") {
		t.Fatalf("a shutdown that cut a tunnel says it was clean:\n%s", px.out.String())
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the tunnel after shutdown: %v, want EOF", err)
	}
}
