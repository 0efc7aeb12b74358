package outbound

import (
	"net/http"
	"sync"
	"time"
)

// MaxIdleConnsPerHost is how many idle connections the pooled transport keeps
// to one host. http.DefaultTransport keeps 2: under a burst of callbacks every
// exchange past the second opens a new TCP and TLS connection to the token
// endpoint and closes it again.
const MaxIdleConnsPerHost = 64

// pooledTransport is the transport of every default client. It is one value
// for the process on purpose: a connection pool is only worth having when it
// is shared. It is not mutable global state in the sense that matters: its
// configuration is fixed when it is first made and nothing writes it
// afterwards; the only state inside is http.Transport's own connection pool,
// which is safe for concurrent use, and a caller who wants another pool
// passes a client of its own.
var pooledTransport = sync.OnceValue(func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * MaxIdleConnsPerHost
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
})

// Client is a client over the pooled transport whose requests each end
// after timeout.
func Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: pooledTransport()}
}
