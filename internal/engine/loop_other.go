//go:build !unix

package engine

const loopSupported = false

func (c *conn) rawRead(p []byte) (int, error) { panic("engine: no read loop on this system") }
