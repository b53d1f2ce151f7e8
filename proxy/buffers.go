package proxy

import "sync"

// copyBufferSize is the size of the buffers the ReverseProxy copies
// response bodies through: what it allocates itself when it has no pool.
const copyBufferSize = 32 << 10

// bufferPool lends the ReverseProxy its copy buffers (an
// httputil.BufferPool). Without one, every proxied response allocates a
// fresh 32 KiB buffer, which at a few thousand responses a second is most
// of the proxy's garbage by bytes and a visible share of its CPU (see
// docs/bench/proxy.md). The pool holds array pointers, so neither Get nor
// Put allocates. The zero value is ready to use; safe for concurrent use.
type bufferPool struct{ p sync.Pool }

// Get returns a buffer of copyBufferSize bytes.
func (b *bufferPool) Get() []byte {
	if a, ok := b.p.Get().(*[copyBufferSize]byte); ok {
		return a[:]
	}
	return make([]byte, copyBufferSize)
}

// Put takes a buffer back. One whose capacity is not copyBufferSize
// (never handed out by Get) is dropped.
func (b *bufferPool) Put(buf []byte) {
	if cap(buf) != copyBufferSize {
		return
	}
	b.p.Put((*[copyBufferSize]byte)(buf[:copyBufferSize]))
}
