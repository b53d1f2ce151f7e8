// Command caddy is Caddy v2 with its standard modules, as xcaddy would
// build it, for the proxy comparison only (bench/proxy/run.sh). It is its
// own Go module so that Caddy's dependency tree stays out of sluice's and
// bench's go.mod; CI never builds it, the scripts build it on demand.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() {
	caddycmd.Main()
}
