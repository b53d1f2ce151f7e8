package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/server"
)

// addrFlag is a listen address and the flag that gave it.
type addrFlag struct{ flag, addr string }

// listenFailed reports the error of server.Listen for the command cmd and
// returns its exit code: a configuration the frame refuses is a usage
// error; an address that cannot be bound (in use, not permitted, not this
// host's) is exitBind, with the flag that named it; anything else is a
// failure.
func listenFailed(e env, cmd string, err error, addrs ...addrFlag) int {
	if errors.Is(err, connlimit.ErrInvalidConfig) || errors.Is(err, server.ErrInvalidConfig) || errors.Is(err, connlimit.ErrNoHeadroom) {
		return usageError(e, cmd, err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "listen" {
		printError(e, cmd, err)
		return exitFail
	}
	which := whichAddr(op, addrs)
	var why string
	code := exitBind
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		why = "the address is in use: another process listens on it; stop that process or pick another port (port 0 picks a free one)"
	case errors.Is(err, syscall.EACCES):
		why = "permission denied: ports below 1024 need privileges (CAP_NET_BIND_SERVICE); pick a higher port"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		why = "the address is not one of this host's"
	default:
		why, code = op.Err.Error(), exitUsage
	}
	if which.flag == "" {
		printError(e, cmd, fmt.Errorf("cannot listen: %s (%v)", why, err))
		return code
	}
	fmt.Fprintf(e.stderr, "sluice %s: --%s %s: %s\n", cmd, which.flag, which.addr, why)
	if code == exitUsage {
		fmt.Fprint(e.stderr, helpHint(cmd))
	}
	return code
}

// whichAddr finds the flag whose address the failed listen tried: the one
// resolving to op's address, or naming the host a lookup failed on.
func whichAddr(op *net.OpError, addrs []addrFlag) addrFlag {
	if ta, ok := op.Addr.(*net.TCPAddr); ok {
		for _, a := range addrs {
			if ra, err := net.ResolveTCPAddr("tcp", a.addr); err == nil && ra.Port == ta.Port && (ra.IP == nil || ra.IP.Equal(ta.IP)) {
				return a
			}
		}
	}
	var dns *net.DNSError
	if errors.As(op.Err, &dns) {
		for _, a := range addrs {
			if host, _, err := net.SplitHostPort(a.addr); err == nil && host == dns.Name {
				return a
			}
		}
	}
	if len(addrs) == 1 {
		return addrs[0]
	}
	return addrFlag{}
}
