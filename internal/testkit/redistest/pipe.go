package redistest

import (
	"net"
	"sync"
)

// bufferedConn gives the client's end of an in-memory connection a send
// buffer, as a socket has one. net.Pipe has none: a client that writes a long
// pipeline before it reads a reply (go-redis does) would wait for miniredis,
// which waits for the client to read its first reply before it reads on.
// Writes are handed, in order, to a goroutine that ends with the connection.
type bufferedConn struct {
	net.Conn
	mu     sync.Mutex
	more   sync.Cond // signalled when buf grows or the connection closes
	buf    []byte
	err    error // the first failed write, or net.ErrClosed once closed
	closed bool
}

func buffered(c net.Conn) net.Conn {
	b := &bufferedConn{Conn: c}
	b.more.L = &b.mu
	go b.send()
	return b
}

// Write queues p for the connection and returns at once; a write that failed
// before fails every one after it.
func (b *bufferedConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, b.err
	}
	b.buf = append(b.buf, p...)
	b.more.Signal()
	return len(p), nil
}

// send writes what Write queued, until the connection closes or a write fails.
func (b *bufferedConn) send() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.buf) == 0 && !b.closed {
			b.more.Wait()
		}
		if b.closed {
			return
		}
		out := b.buf
		b.buf = nil
		b.mu.Unlock()
		_, err := b.Conn.Write(out)
		b.mu.Lock()
		if err != nil {
			b.err, b.closed = err, true
			return
		}
	}
}

// Close closes the connection, which ends a write in progress.
func (b *bufferedConn) Close() error {
	b.mu.Lock()
	b.closed = true
	if b.err == nil {
		b.err = net.ErrClosed
	}
	b.more.Signal()
	b.mu.Unlock()
	return b.Conn.Close()
}
