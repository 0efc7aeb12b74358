// Package oauthflowtest is a test kit for apps built on oauthflow, in the
// style of net/http/httptest: a local OAuth 2.0 authorization server, a
// provider that talks to it, and a browser that plays the user.
//
// The [Server] speaks what a provider speaks: the authorization-code grant
// with PKCE (RFC 7636), refresh with or without rotation, revocation
// (RFC 7009), introspection (RFC 7662), metadata (RFC 8414), the iss
// parameter (RFC 9207), the device grant (RFC 8628), DPoP (RFC 9449) when
// asked, a user-info endpoint and a small protected API. [Options] set its
// lifetimes and behaviours; [Server.FailNext], [Server.DenyNext] and
// [Server.DenyDevice] script failures and refusals; [Server.Stats] and
// [Server.Active] tell a test what the server saw.
//
// [Server.Provider] is an [oauthflow.Provider] for it, built with the
// [providers] package, ready to register. A [Browser] follows a sign-in's
// link, answers the consent page and lands on the app's callback; [SignIn]
// does all of it in one line of a test:
//
//	func TestConnect(t *testing.T) {
//		idp := oauthflowtest.NewServer(oauthflowtest.Options{})
//		defer idp.Close()
//		mod, err := oauthflow.New(t.Context(), oauthflow.Config{KV: oauthflow.NewMemoryKV()})
//		if err != nil {
//			t.Fatal(err)
//		}
//		defer mod.Close()
//		mux := http.NewServeMux()
//		mod.Mount(mux)
//		app := httptest.NewServer(mux)
//		defer app.Close()
//		if err := mod.Registry.Register(idp.Provider("local", app.URL+oauthflow.CallbackPath)); err != nil {
//			t.Fatal(err)
//		}
//
//		oauthflowtest.SignIn(t, mod, "alice", "local")
//		resp, err := mod.Tokens.Client(t.Context(), "alice", "local").Get(idp.UserinfoURL())
//		// ...
//	}
//
// The server keeps its state in memory and talks to loopback addresses only:
// it redirects to any http URL on a loopback host, so an app under test may
// listen on any port and path. A program can run it beside its own handlers
// with [Mount], as the offline examples do.
package oauthflowtest
