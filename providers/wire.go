package providers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"

	"github.com/oauthflow/oauthflow"
)

// maxBody bounds what is read from a provider's answer (x/oauth2 uses the same 1 MiB).
const maxBody = 1 << 20

// answer is one HTTP answer from a provider's endpoint.
type answer struct {
	status      int
	contentType string
	body        []byte
	decoded     *tokenResponse // body as read by the recorder, nil when it could not be
}

// send does req, in which the client authenticates, with the provider's
// client and reads the answer; a failure is a *oauthflow.ProviderError.
func (p *OAuth2) send(req *http.Request) (*answer, error) { return p.sendWith(p.authenticating(), req) }

// sendWith is send with the client c.
func (p *OAuth2) sendWith(c *http.Client, req *http.Request) (*answer, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, &oauthflow.ProviderError{ProviderID: p.cfg.ID, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &oauthflow.ProviderError{ProviderID: p.cfg.ID, StatusCode: resp.StatusCode, Err: err}
	}
	return &answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body}, nil
}

// recorder is the transport of one token call. It keeps the last answer
// (x/oauth2's auto-detected auth style may send two requests) and, for
// providers that want JSON, re-encodes the form body x/oauth2 built.
// Each call gets its own recorder, so it needs no lock.
type recorder struct {
	base     http.RoundTripper
	jsonBody bool
	params   map[string]string // added to the request's form (Config.TokenParams)
	cfg      *Config           // its renamed client parameters (Config.ClientIDParam)
	last     *answer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(r.params) > 0 || r.cfg.renames() {
		var err error
		if req, err = r.cfg.withFormParams(req, r.params); err != nil {
			return nil, err
		}
	}
	if r.jsonBody {
		var err error
		if req, err = formToJSON(req); err != nil {
			return nil, err
		}
	}
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("providers: reading token response: %w", err)
	}
	r.last = &answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body}
	if tr, err := decodeTokenResponse(r.last); err == nil {
		r.last.decoded = tr
		if !failed(resp.StatusCode, tr) && tr.AccessToken != "" {
			// A token answer: this package reads it (parse), and x/oauth2's
			// own reading (the answer decoded twice more, once into a map of
			// every field) would only be dropped. It reads a stand-in instead.
			body = standInAnswer
			resp.Header.Set("Content-Type", "application/json")
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// standInAnswer is what x/oauth2 reads in place of a token answer this package
// has read already: the least it accepts as a success.
var standInAnswer = []byte(`{"access_token":"-","token_type":"Bearer"}`)

// formToJSON returns a copy of req whose form body is a JSON object of strings.
// withFormParams is req with params set in its form body and the client's
// parameters renamed as the provider names them.
func (c *Config) withFormParams(req *http.Request, params map[string]string) (*http.Request, error) {
	form, err := readForm(req)
	if err != nil {
		return nil, err
	}
	for k, v := range params {
		form.Set(k, v)
	}
	c.renameForm(form)
	return withBody(req, []byte(form.Encode()), "application/x-www-form-urlencoded"), nil
}

// renames reports whether the provider names client_id or client_secret otherwise.
func (c *Config) renames() bool { return c.ClientIDParam != "" || c.ClientSecretParam != "" }

// renameForm renames client_id and client_secret in v as the provider names them.
func (c *Config) renameForm(v url.Values) {
	if !c.renames() {
		return
	}
	for from, to := range map[string]string{"client_id": c.ClientIDParam, "client_secret": c.ClientSecretParam} {
		if vals, ok := v[from]; ok && to != "" {
			delete(v, from)
			v[to] = vals
		}
	}
}

// renameQuery is the URL u with its client_id renamed as the provider names it.
func (c *Config) renameQuery(u string) string {
	if c.ClientIDParam == "" {
		return u
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := parsed.Query()
	c.renameForm(q)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

// refreshParams are the extra parameters of a refresh request: TokenParams,
// then RefreshParams.
func (c *Config) refreshParams() map[string]string {
	if len(c.RefreshParams) == 0 {
		return c.TokenParams
	}
	all := maps.Clone(c.TokenParams)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, c.RefreshParams)
	return all
}

// readForm reads the form body of a token request.
func readForm(req *http.Request) (url.Values, error) {
	if req.Body == nil {
		return url.Values{}, nil
	}
	raw, err := io.ReadAll(io.LimitReader(req.Body, maxBody))
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("providers: reading token request: %w", err)
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, fmt.Errorf("providers: token request form: %w", err)
	}
	return form, nil
}

// withBody is a copy of req that sends body as contentType.
func withBody(req *http.Request, body []byte, contentType string) *http.Request {
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Type", contentType)
	return out
}

func formToJSON(req *http.Request) (*http.Request, error) {
	if req.Body == nil {
		return req, nil
	}
	form, err := readForm(req)
	if err != nil {
		return nil, err
	}
	obj := make(map[string]string, len(form))
	for k := range form {
		obj[k] = form.Get(k)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("providers: token request JSON: %w", err)
	}
	return withBody(req, body, "application/json"), nil
}

func transport(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}
