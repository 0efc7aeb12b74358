package oauthflow

import (
	"net/http"
	"sync"
	"time"
)

// defaultHTTPTimeout bounds each provider request made with the Module's
// default client.
const defaultHTTPTimeout = 30 * time.Second

// pooledTransport is the transport of the Module's default HTTP client (used
// for provider calls that honour oauth2.HTTPClient). http.DefaultTransport
// keeps 2 idle connections per host, so a burst of callbacks would open and
// close a connection to the token endpoint per exchange. It is one value for
// the process because a pool is only worth having when it is shared; its
// configuration is fixed when it is first made and never written afterwards,
// and http.Transport's pool is safe for concurrent use. Config.HTTPClient
// replaces it.
var pooledTransport = sync.OnceValue(func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return t
})

// defaultHTTPClient is the client a Module uses when Config.HTTPClient is nil.
func defaultHTTPClient() *http.Client {
	return &http.Client{Timeout: defaultHTTPTimeout, Transport: pooledTransport()}
}
