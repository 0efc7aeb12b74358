package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/providers"
)

const demoProvider = "demo"

// signInRig is a Module (the main configuration) served on loopback, whose
// provider is the library's demo authorization server, and a browser that
// follows each sign-in through both: the "oauth" workflow's prompt, the
// authorization request, the redirect to the callback.
type signInRig struct {
	as      *authserver.Server
	api     *httptest.Server
	mod     *oauthflow.Module
	browser *http.Client
}

func newSignInRig(ctx context.Context, kv oauthflow.KV, prefix string) (*signInRig, error) {
	r := &signInRig{as: authserver.Start(authserver.Options{})}
	mux := http.NewServeMux()
	r.api = httptest.NewServer(mux)
	p, err := providers.NewOAuth2(providers.Config{ID: demoProvider, AuthURL: r.as.AuthURL(), TokenURL: r.as.TokenURL(),
		Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader},
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: authserver.DefaultClientSecret,
			RedirectURL: r.api.URL + oauthflow.CallbackPath})
	reg := oauthflow.NewRegistry()
	if err == nil {
		err = reg.Register(p)
	}
	if err == nil {
		r.mod, err = scaleModule(ctx, kv, prefix, scaleConfig{encrypted: true, ahead: true}, reg)
	}
	if err != nil {
		r.close()
		return nil, err
	}
	r.mod.Mount(mux)
	r.browser = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: scaleWorkers},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return r, nil
}

// signIn runs one sign-in for user end to end.
func (r *signInRig) signIn(ctx context.Context, user string) error {
	_, doc, err := r.mod.StartSignIn(ctx, user, demoProvider)
	if err != nil {
		return err
	}
	back, err := r.visit(doc.AuthURL, http.StatusFound)
	if err != nil {
		return fmt.Errorf("authorize: %w", err)
	}
	if _, err := r.visit(back.Get("Location"), http.StatusOK); err != nil {
		return fmt.Errorf("callback: %w", err)
	}
	return nil
}

// visit GETs url as the browser and wants status; it returns the answer's headers.
func (r *signInRig) visit(url string, status int) (http.Header, error) {
	resp, err := r.browser.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != status {
		return nil, fmt.Errorf("answered %d, want %d", resp.StatusCode, status)
	}
	return resp.Header, nil
}

// run runs m sign-ins, users signer-0000000 on, on scaleWorkers goroutines.
func (r *signInRig) run(ctx context.Context, m int) error {
	return parallel(m, func(i int) error { return r.signIn(ctx, fmt.Sprintf("signer-%07d", i)) })
}

// closeProvider shuts the authorization server down, so that what it kept
// of each grant is no longer reachable from this process.
func (r *signInRig) closeProvider() {
	if r.browser != nil {
		r.browser.CloseIdleConnections()
	}
	r.as.Close()
	r.as = nil
}

func (r *signInRig) close() {
	if r.mod != nil {
		_ = r.mod.Close()
	}
	r.api.Close()
	if r.as != nil {
		r.closeProvider()
	}
}

// signInResult is what m completed sign-ins left in Redis.
type signInResult struct {
	m       int
	census  census
	floor   map[string]int64 // Redis's minimum key of each kind's name length
	keptFor time.Duration    // a finished run's time to live, as Redis tells it
	elapsed time.Duration
}

// signIns runs m sign-ins against Redis and weighs what they left.
func (s *scaler) signIns(ctx context.Context, m int) (_ *signInResult, err error) {
	defer func() {
		if cerr := clearPrefix(ctx, s.e.rdb, s.e.prefix); err == nil {
			err = cerr
		}
	}()
	rig, err := newSignInRig(ctx, oauthflow.NewRedisKV(s.e.rdb), s.e.prefix)
	if err != nil {
		return nil, err
	}
	defer rig.close()
	res := &signInResult{m: m, floor: map[string]int64{}}
	start := time.Now()
	if err := rig.run(ctx, m); err != nil {
		return nil, err
	}
	res.elapsed = time.Since(start)
	if res.census, err = takeCensus(ctx, s.e.rdb, s.e.prefix); err != nil {
		return nil, err
	}
	for kind, k := range res.census {
		if res.floor[kind], err = s.floors.key(ctx, k.nameLen()); err != nil {
			return nil, err
		}
	}
	res.keptFor, err = s.runTTL(ctx)
	s.progress("%d sign-ins in Redis done in %s", m, res.elapsed.Round(time.Millisecond))
	return res, err
}

// runTTL is the time to live of one finished run's record.
func (s *scaler) runTTL(ctx context.Context) (time.Duration, error) {
	var cursor uint64
	for {
		keys, next, err := s.e.rdb.Scan(ctx, cursor, s.e.prefix+"oauth:run:*", 1000).Result()
		if err != nil {
			return 0, err
		}
		if len(keys) > 0 {
			return s.e.rdb.PTTL(ctx, keys[0]).Result()
		}
		if cursor = next; cursor == 0 {
			return 0, errors.New("no finished run was kept")
		}
	}
}
