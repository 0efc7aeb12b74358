// Package oauthflow runs the OAuth 2.0 authorization-code flow for any registered
// provider, stores tokens per user and provider in Redis (or memory), refreshes them
// on read, and lets a workflow that hits "unauthorized" send its user through
// sign-in and resume.
//
// # Mounting it in a service
//
// New wires every service, the two tools and the "oauth" workflow; the host app
// registers its providers and mounts the two public endpoints on its own mux:
//
//	m, err := oauthflow.New(ctx, oauthflow.Config{}) // Redis from KVSTORE_*; memory if it cannot be reached
//	github, err := providers.FromEnv("github")        // GITHUB_CLIENT_ID, _CLIENT_SECRET, _OAUTH_REDIRECT_URI
//	err = m.Registry.Register(github)
//	m.Mount(mux)                                      // GET /api/v1/oauth/callback, POST /api/v1/oauth/complete
//	mux.Handle("GET /oauth/", m.FrontendHandler(""))  // optional: callback page and oauth-prompt widget
//
//	run, prompt, err := m.StartSignIn(ctx, userID, "github") // show prompt.AuthURL as "Connect GitHub"
//	client := m.Tokens.Client(ctx, userID, "github")         // Authorization: Bearer, refreshed as needed
//
// The callback consumes the single-use state, exchanges the code (with PKCE) and
// stores the tokens before it answers, so its page tells the real outcome.
//
// # Resuming a workflow after sign-in
//
// A consumer workflow's tool reads its token with TokenStore.GetValidAccessToken
// and returns the error: a Tool turns ErrNoToken into {"error":"unauthorized"}.
// The workflow then launches the "oauth" workflow as a child with
// RunOptions{Callback: &Callback{Transition: "authCompleted"}} and waits in
// "awaiting_auth"; when the user has signed in, the engine fires the parent's
// "authCompleted" (a waiting transition back to "start") with {runId, status,
// result}, and the tool runs again. See Example_consumerWorkflow.
//
// # Storage
//
// Tokens live under "oauth:{userId}:{providerId}", pending sign-ins under
// "oauth:session:{state}", runs under "oauth:run:{runId}", so several instances
// that share one Redis behave as one: a flow started on one completes on any
// other, and an expired token is refreshed once between them.
//
// No user ID can reach another user's key or another kind of record. A user ID
// is written into keys as it is, as in earlier versions, unless its first
// ":"-separated segment is a word that names a record kind (session, run, doc,
// lock, sys, due, idx, mcp, conn, meta) or it starts with "~": such an ID is
// written as "~" followed by its base64url encoding, so user "lock:alice" keeps
// its tokens under "oauth:~bG9jazphbGljZQ:github", never in alice's refresh
// lock. Upgrading changes the key of such IDs only (their users sign in once
// more); IDs like "alice", "user:42" or "auth0|5f1c" keep their keys. Provider
// IDs, run IDs and document names never contain ":", and the public endpoints
// refuse a state that is not of the form build_oauth_url issues before they
// touch the store.
//
// # Refreshes under races and faults
//
// A refresh writes only if the record is still the one it read (a
// compare-and-set on that one key), and only while it still holds the refresh
// lock: a sign-in (StoreTokens) or a disconnect (DeleteTokens) during a refresh
// always wins, and the refresh's callers get the record as it is now. When the
// write after a rotating refresh fails, the callers get the new token at once,
// the write is retried until the refresh timeout, and what is still unwritten
// is kept in the process and written by the next read (EventRefreshUnsaved).
//
// # Sign-ins that always finish
//
// Once a callback consumes a state, the server finishes the sign-in (the
// exchange, the token write, the prompt, the run's end and the parent's resume)
// under a context of its own, so a browser that goes away loses nothing. A
// sign-in nobody finishes within Config.SignInTTL (10 minutes) lapses: the
// Module's background worker ends its run as {authenticated: false}, the prompt
// says the link expired, and the parent's callback fires with status "failed";
// a late callback is refused without an exchange. A child run's end reaches its
// parent's callback transition exactly once in effect: it is recorded as due
// before the first try, retried by the worker until it lands, and ignored by a
// parent that already heard it. The worker claims due work
// from one index in the store with a single atomic command, so any number of
// instances share it; Close stops it.
//
// A completion that the instance running it dies in (or hangs in past
// Config.CompletionTimeout) is failed by another instance once the run lock's
// lease lapses: the run ends {authenticated: false} and the parent hears
// "failed". A code is never exchanged twice: the state that carried it is
// spent when the callback consumes it, and the worker never exchanges.
package oauthflow
