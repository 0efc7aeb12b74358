// Package authserver is a small OAuth 2.0 authorization server that plays the provider
// in tests and in the offline examples.
//
// It runs the authorization-code grant with PKCE (RFC 7636), refresh tokens with or
// without rotation, revocation (RFC 7009), introspection (RFC 7662), server metadata
// (RFC 8414), the iss response parameter (RFC 9207), the device authorization grant
// (RFC 8628), pushed authorization requests (RFC 9126), private_key_jwt client
// authentication (RFC 7523) and, when asked, DPoP-bound tokens and server nonces (RFC 9449), and
// serves two protected endpoints: a demo API, GET /api/me, and user info, GET
// /userinfo. State lives in memory on the Server value.
//
// In a test:
//
//	srv := authserver.Start(authserver.Options{RotateRefreshTokens: true})
//	t.Cleanup(srv.Close)
//	srv.FailNext(authserver.Failure{Grant: authserver.GrantRefreshToken, Error: "invalid_grant"})
//
// In a program, mount it like any handler:
//
//	srv := authserver.New(authserver.Options{Issuer: "http://127.0.0.1:8080/demo", ConsentPage: true})
//	mux.Handle("/demo/", http.StripPrefix("/demo", srv))
package authserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint paths, relative to the issuer.
const (
	PathAuthorize  = "/authorize"
	PathDecision   = "/authorize/decision"
	PathToken      = "/token"
	PathRevoke     = "/revoke"
	PathIntrospect = "/introspect"
	PathAPI        = "/api/me"
	PathUserinfo   = "/userinfo"
	PathMetadata   = "/.well-known/oauth-authorization-server"

	PathPAR = "/par" // RFC 9126 §2

	PathDeviceAuthorization = "/device_authorization" // RFC 8628 §3.1
	PathDevice              = "/device"               // the verification URI, where the user enters the user code
)

// Server is an OAuth 2.0 authorization server and an http.Handler. It is safe for
// concurrent use.
type Server struct {
	opts    Options
	clients map[string]*Client
	issuer  string
	mux     *http.ServeMux

	store        store
	failures     failureQueue
	parFailures  failureQueue // FailNextPAR
	denyNext     atomic.Int64
	slowDownNext atomic.Int64
	stats        counters
	nonce        atomic.Pointer[string] // the DPoP nonce Options.DPoPNonces demands
	proofs       proofLog               // the DPoP proofs accepted lately
	assertions   proofLog               // the jtis of the client assertions accepted lately

	done      chan struct{}
	closeOnce sync.Once
	httpSrv   *httptest.Server
}

// New returns a server configured by opts. It panics when opts registers an invalid
// client (no ID, a public client with a secret, a duplicate ID, a bad redirect URI).
func New(opts Options) *Server {
	opts = opts.withDefaults()
	clients, err := clientIndex(opts.Clients)
	if err != nil {
		panic(err)
	}
	s := &Server{
		opts:    opts,
		clients: clients,
		issuer:  strings.TrimSuffix(opts.Issuer, "/"),
		store:   newStore(),
		proofs:  proofLog{max: maxProofLog},
		done:    make(chan struct{}),
	}
	s.assertions.max = maxProofLog
	s.RotateDPoPNonce()
	s.mux = s.routes()
	return s
}

// Start runs a new server on a loopback httptest.Server, with Issuer set to its URL.
// Call Close when done, for example with t.Cleanup(srv.Close).
func Start(opts Options) *Server {
	ts := httptest.NewUnstartedServer(nil)
	opts.Issuer = "http://" + ts.Listener.Addr().String()
	s := New(opts)
	ts.Config.Handler = s
	ts.Start()
	s.httpSrv = ts
	return s
}

// Close releases requests held by a scripted delay and, for a server made by Start,
// shuts the listener down. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	if s.httpSrv != nil {
		s.httpSrv.Close()
	}
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathAuthorize, s.handleAuthorize)
	mux.HandleFunc("POST "+PathDecision, s.handleDecision)
	mux.HandleFunc("POST "+PathToken, s.handleToken)
	mux.HandleFunc("POST "+PathRevoke, s.handleRevoke)
	mux.HandleFunc("POST "+PathIntrospect, s.handleIntrospect)
	mux.HandleFunc("GET "+PathAPI, s.handleAPI)
	mux.HandleFunc("GET "+PathUserinfo, s.handleUserinfo)
	mux.HandleFunc("GET "+PathMetadata, s.handleMetadata)
	if s.opts.PAR {
		mux.HandleFunc("POST "+PathPAR, s.handlePAR)
	}
	if !s.opts.NoDeviceGrant {
		mux.HandleFunc("POST "+PathDeviceAuthorization, s.handleDeviceAuthorization)
		mux.HandleFunc("GET "+PathDevice, s.handleDevicePage)
		mux.HandleFunc("POST "+PathDevice, s.handleDeviceDecision)
	}
	return mux
}

// ServeHTTP serves the endpoints named by the Path constants.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// URL is the issuer: Options.Issuer, or the test server's URL for a server made by Start.
func (s *Server) URL() string { return s.issuer }

// AuthURL is the authorization endpoint.
func (s *Server) AuthURL() string { return s.issuer + PathAuthorize }

// TokenURL is the token endpoint.
func (s *Server) TokenURL() string { return s.issuer + PathToken }

// RevokeURL is the revocation endpoint (RFC 7009).
func (s *Server) RevokeURL() string { return s.issuer + PathRevoke }

// IntrospectURL is the introspection endpoint (RFC 7662).
func (s *Server) IntrospectURL() string { return s.issuer + PathIntrospect }

// DeviceAuthorizationURL is the device authorization endpoint (RFC 8628 §3.1).
func (s *Server) DeviceAuthorizationURL() string { return s.issuer + PathDeviceAuthorization }

// DeviceURL is the verification URI, the page where the user enters a user code.
func (s *Server) DeviceURL() string { return s.issuer + PathDevice }

// APIURL is the protected demo API, which answers the signed-in user and their repositories.
func (s *Server) APIURL() string { return s.issuer + PathAPI }

// UserinfoURL is the protected user-info endpoint, which names the signed-in user.
func (s *Server) UserinfoURL() string { return s.issuer + PathUserinfo }

// DenyNext makes the next authorization request end in access_denied, as if the user
// clicked Deny. Calls add up: DenyNext twice denies the next two.
func (s *Server) DenyNext() { s.denyNext.Add(1) }

// takeOne consumes one of the pending calls n counts (DenyNext, SlowDownNext), if any.
func takeOne(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// issuerFor is the issuer as seen by r: the configured one, or r's scheme and host.
func (s *Server) issuerFor(r *http.Request) string {
	if s.issuer != "" {
		return s.issuer
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (s *Server) now() time.Time { return s.opts.Now() }
