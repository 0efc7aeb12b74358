// Package soak runs the library the way a deployment does: three separate
// app processes (internal/cmd/soak/app) on one Redis or one Redis Cluster, an
// authorization server that rotates refresh tokens and fails 5% of token
// calls with 503, sign-ins started on one instance and completed on another,
// refresh storms on shared users from all three at once, and one instance
// killed (SIGKILL) and restarted mid-way. It counts what a user would notice:
// flows started, completed and failed, codes exchanged twice, refresh tokens
// used twice, connections lost.
package soak

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
)

// Plan is how much load a run puts on the instances.
type Plan struct {
	Users       int // sign-ins, one user each
	Workers     int // sign-ins in flight at once
	Storms      int // refresh storms, each on a connected user of its own
	StormReads  int // concurrent reads in each storm, spread over the instances
	FailPercent int // token calls answered 503 (code exchanges and refreshes alike)
}

// Env is where the instances run.
type Env struct {
	Binary string // the built internal/cmd/soak/app
	Redis  string // SOAK_REDIS: "host:port" or "cluster:host:port,..."
	Prefix string // key prefix of this run
	Log    func(format string, args ...any)
}

// Report is what a run counted.
type Report struct {
	Started, Completed, Failed int            // sign-ins
	FailedBy                   map[string]int // why sign-ins failed
	CodesIssued                int64          // codes the authorization server issued
	CodeRequests               int64          // code exchange requests it received (a 503 is retried with the same code)
	CodesExchanged             int64          // codes it exchanged for tokens
	CodeReplays                int64          // codes presented again after their use: doubled exchanges
	Storms                     int
	StormReads, StormFailed    int   // reads in storms, and those that failed (a 503 from the provider)
	StormRefreshes             []int // successful refreshes each storm caused
	RefreshRequests, Refreshes int64 // refresh requests the provider received, and its successful refreshes (each rotates)
	RefreshReuses              int64 // rotated refresh tokens presented again: doubled refreshes
	Connected, Lost            int   // users connected at the end, and connected users whose connection is gone
	Killed                     int   // instances killed and restarted
	Elapsed                    time.Duration
}

// Doubled is every exchange or refresh the provider saw twice.
func (r Report) Doubled() int64 { return r.CodeReplays + r.RefreshReuses }

// MaxStormRefreshes is the most successful refreshes one storm caused.
func (r Report) MaxStormRefreshes() int {
	n := 0
	for _, v := range r.StormRefreshes {
		n = max(n, v)
	}
	return n
}

// Run starts the authorization server and three instances, puts plan's load on
// them, and reports. The instances are stopped when it returns.
func Run(ctx context.Context, env Env, plan Plan) (Report, error) {
	start := time.Now()
	as := authserver.Start(authserver.Options{RotateRefreshTokens: true,
		// 1 s longer than the store's 60 s skew: a token is fresh for one
		// second after it is issued, so a storm a second later must refresh it.
		AccessTokenTTL: 61 * time.Second,
		OnToken:        failPercent(plan.FailPercent)})
	defer as.Close()
	fleet, err := startFleet(ctx, env, as.URL(), 3)
	if err != nil {
		return Report{}, err
	}
	defer fleet.stop()
	r := Report{FailedBy: map[string]int{}}
	users := signIns(ctx, fleet, plan, &r)
	if len(users) < plan.Storms {
		return r, fmt.Errorf("soak: %d users connected, fewer than the %d storms need", len(users), plan.Storms)
	}
	time.Sleep(1100 * time.Millisecond) // the tokens' lifetime, past the skew: every user is due
	for i := range plan.Storms {
		before := as.Stats().Refreshes
		ok, failed := storm(ctx, fleet, users[i], plan.StormReads)
		r.StormReads += ok + failed
		r.StormFailed += failed
		r.StormRefreshes = append(r.StormRefreshes, int(as.Stats().Refreshes-before))
		r.Storms++
	}
	time.Sleep(1100 * time.Millisecond)
	r.Connected, r.Lost = census(ctx, fleet, users)
	st := as.Stats()
	r.CodesIssued, r.CodeRequests, r.CodesExchanged, r.CodeReplays = st.Authorizations, st.CodeRequests, st.CodesExchanged, st.CodeReplays
	r.RefreshRequests, r.Refreshes, r.RefreshReuses = st.RefreshRequests, st.Refreshes, st.RefreshReuses
	r.Killed = fleet.killed
	r.Elapsed = time.Since(start)
	return r, nil
}

// failPercent answers pct% of token calls with 503.
func failPercent(pct int) func(string) *authserver.Failure {
	return func(string) *authserver.Failure {
		if pct > 0 && randN(100) < pct {
			return &authserver.Failure{Status: http.StatusServiceUnavailable}
		}
		return nil
	}
}

func randN(n int) int {
	v, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return int(v.Int64())
}

// signIns runs plan.Users sign-ins, each started on a random instance and
// completed on another, with one instance killed and restarted half-way. It
// returns the users whose sign-in completed.
func signIns(ctx context.Context, fleet *fleet, plan Plan, r *Report) []string {
	var (
		mu    sync.Mutex
		users []string
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	killAt := int64(plan.Users / 2)
	for range plan.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(plan.Users) {
					return
				}
				if i == killAt {
					fleet.killAndRestart(ctx, 2)
				}
				user := fmt.Sprintf("user-%d", i)
				err := signIn(ctx, fleet, user)
				mu.Lock()
				r.Started++
				if err != nil {
					r.Failed++
					r.FailedBy[reason(err)]++
				} else {
					r.Completed++
					users = append(users, user)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return users
}

// signIn starts user's sign-in on one instance, consents at the provider and
// delivers the redirect to another instance, and checks the outcome.
func signIn(ctx context.Context, fleet *fleet, user string) error {
	a, b := fleet.pick(), fleet.pick()
	var started struct{ State, AuthURL string }
	if err := fleet.call(ctx, a, http.MethodPost, "/soak/start?user="+url.QueryEscape(user), &started); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	loc, err := consent(ctx, started.AuthURL, user)
	if err != nil {
		return fmt.Errorf("consent: %w", err)
	}
	status, err := fleet.get(ctx, b, loc.RequestURI())
	if err != nil {
		return fmt.Errorf("callback: %w", err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("callback: HTTP %d", status)
	}
	return nil
}

var noRedirect = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func consent(ctx context.Context, authURL, user string) (*url.URL, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("login_hint", user)
	u.RawQuery = q.Encode()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	resp, err := noRedirect.Do(req)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("authorize answered %d", resp.StatusCode)
	}
	return url.Parse(resp.Header.Get("Location"))
}

// reason names a failure for the report: the step and its kind.
func reason(err error) string {
	s := err.Error()
	step, rest, _ := strings.Cut(s, ": ")
	switch {
	case strings.Contains(rest, "connection refused"), strings.Contains(rest, "connection reset"), strings.Contains(rest, "EOF"):
		return step + ": instance down"
	case strings.HasPrefix(rest, "HTTP "):
		return step + ": " + rest
	}
	return step + ": other"
}

// storm reads user's token n times at once, from every instance.
func storm(ctx context.Context, fleet *fleet, user string, n int) (ok, failed int) {
	var wg sync.WaitGroup
	var okN, failedN atomic.Int64
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			var out struct{ Token, Error string }
			err := fleet.call(ctx, i%3, http.MethodGet, "/soak/token?user="+user, &out)
			if err != nil || out.Token == "" {
				failedN.Add(1)
				return
			}
			okN.Add(1)
		}()
	}
	close(gate)
	wg.Wait()
	return int(okN.Load()), int(failedN.Load())
}

// census reads every connected user's token once more, which refreshes it
// (each is due by now): a user whose stored refresh token is not the live one
// at the provider, or whose record is gone, has lost the connection. A read
// that fails on a provider 503 is tried again, after the connection's backoff
// when it is in one.
const refreshRetryWait = 100 * time.Millisecond

func census(ctx context.Context, fleet *fleet, users []string) (connected, lost int) {
	for _, user := range users {
		for attempt := 0; ; attempt++ {
			var out struct{ Token, Error string }
			err := fleet.call(ctx, fleet.pick(), http.MethodGet, "/soak/token?user="+user, &out)
			var he *httpError
			if errors.As(err, &he) && he.body.Error == "no_token" {
				lost++
				break
			}
			if err == nil {
				connected++
				break
			}
			if attempt == 20 {
				lost++ // not gone, but unreadable: counted against us
				break
			}
			if errors.As(err, &he) && he.body.Error == "refresh_failing" {
				time.Sleep(refreshRetryWait) // the connection's backoff: the app's is far shorter than this
			}
		}
	}
	return connected, lost
}

// fleet is the running instances.
type fleet struct {
	env     Env
	issuer  string
	ports   []int
	mu      sync.Mutex
	procs   []*exec.Cmd
	killed  int
	keyring string
	client  *http.Client
}

func startFleet(ctx context.Context, env Env, issuer string, n int) (*fleet, error) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	f := &fleet{env: env, issuer: issuer, keyring: "soak:" + base64.StdEncoding.EncodeToString(key),
		client: &http.Client{Timeout: 60 * time.Second}}
	for range n {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		f.ports = append(f.ports, port)
	}
	f.procs = make([]*exec.Cmd, n)
	for i := range n {
		if err := f.startOne(ctx, i); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (f *fleet) base(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", f.ports[i]) }

// startOne starts instance i and waits until it says it is ready.
func (f *fleet) startOne(ctx context.Context, i int) error {
	cmd := exec.Command(f.env.Binary)
	cmd.Env = append(os.Environ(), "SOAK_ADDR="+strings.TrimPrefix(f.base(i), "http://"), "SOAK_REDIS="+f.env.Redis,
		"SOAK_PREFIX="+f.env.Prefix, "SOAK_ISSUER="+f.issuer, "SOAK_REDIRECT="+f.base(0)+"/api/v1/oauth/callback",
		"OAUTHFLOW_ENCRYPTION_KEYS="+f.keyring)
	cmd.Stderr = logWriter{f.env.Log, fmt.Sprintf("instance %d: ", i)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("soak: instance %d did not start", i)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("soak: instance %d not ready after 30 s", i)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return ctx.Err()
	}
	f.mu.Lock()
	f.procs[i] = cmd
	f.mu.Unlock()
	return nil
}

// killAndRestart ends instance i with SIGKILL, mid-flight, and starts it again.
func (f *fleet) killAndRestart(ctx context.Context, i int) {
	f.mu.Lock()
	cmd := f.procs[i]
	f.procs[i] = nil
	f.killed++
	f.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if err := f.startOne(ctx, i); err != nil {
		f.env.Log("restarting instance %d: %v", i, err)
	}
}

func (f *fleet) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cmd := range f.procs {
		if cmd != nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
}

func (f *fleet) pick() int { return randN(len(f.ports)) }

type httpError struct {
	status int
	body   struct{ Error, Message string }
}

func (e *httpError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.status, e.body.Error, e.body.Message)
}

// call sends a control request to instance i and decodes its JSON answer.
func (f *fleet) call(ctx context.Context, i int, method, path string, out any) error {
	req, _ := http.NewRequestWithContext(ctx, method, f.base(i)+path, nil)
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		he := &httpError{status: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(&he.body)
		return he
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// get fetches path from instance i and returns the status.
func (f *fleet) get(ctx context.Context, i int, path string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.base(i)+path, nil)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// logWriter passes an instance's stderr to the run's log, a line at a time.
type logWriter struct {
	log    func(string, ...any)
	prefix string
}

func (w logWriter) Write(p []byte) (int, error) {
	if w.log != nil {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			w.log("%s%s", w.prefix, line)
		}
	}
	return len(p), nil
}
