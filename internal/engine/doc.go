// Package engine is the HTTP/1.1 server of sluice's servers: a
// connection loop cheaper than net/http's, in front of the same
// handlers. It is the servers' engine, not the library's API: the
// library packages (httpgate and the rest) stay net/http, and HTTP/2,
// h2c and TLS stay on net/http too.
package engine
