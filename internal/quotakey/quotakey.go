// Package quotakey reads what a per-client quota is keyed on, in the one
// text form `sluice serve --quota ...,key=K` and the proxy's route quota
// field "key" share: "ip", the client's address (httpgate.KeyClientIP), or
// "header:<Name>", a request header's value (httpgate.KeyHeader).
//
// It is internal: a library user passes an httpgate.KeyFunc directly.
package quotakey

import (
	"errors"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// ErrInvalid is wrapped by Parse's errors.
var ErrInvalid = errors.New("want ip or header:<Header-Name>")

// IP keys on the client's address.
const IP = "ip"

// headerPrefix starts a header key: header:X-Api-Key.
const headerPrefix = "header:"

// Parse reads a key: IP gives "", "header:X-Api-Key" gives "X-Api-Key",
// which is a valid header field name (httpgate.KeyHeader never panics on
// it). Anything else, the empty string included, is ErrInvalid; its
// message says what is wanted, and the caller names the value (a flag
// part, a route).
func Parse(s string) (header string, err error) {
	if s == IP {
		return "", nil
	}
	name, ok := strings.CutPrefix(s, headerPrefix)
	if !ok || !httpguts.ValidHeaderFieldName(name) {
		return "", ErrInvalid
	}
	return name, nil
}
