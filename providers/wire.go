package providers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// recorder is the transport of one token call. It keeps the last answer
// (x/oauth2's auto-detected auth style may send two requests) and, for
// providers that want JSON, re-encodes the form body x/oauth2 built.
// Each call gets its own recorder, so it needs no lock.
type recorder struct {
	base     http.RoundTripper
	jsonBody bool
	last     *answer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
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
func formToJSON(req *http.Request) (*http.Request, error) {
	if req.Body == nil {
		return req, nil
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
	obj := make(map[string]string, len(form))
	for k := range form {
		obj[k] = form.Get(k)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("providers: token request JSON: %w", err)
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Type", "application/json")
	return out, nil
}

func transport(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}
