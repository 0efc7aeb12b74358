package providers

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/clip"
)

// tokenResponse is an RFC 6749 §5.1/§5.2 answer plus the quirks of the
// catalog: Slack's "ok" flag and nested user token, expires_in as a string,
// scope as an array (Twitch), an error code under another name (HubSpot).
type tokenResponse struct {
	AccessToken      string     `json:"access_token"`
	TokenType        string     `json:"token_type"`
	RefreshToken     string     `json:"refresh_token"`
	ExpiresIn        flexInt    `json:"expires_in"`
	Scope            flexScope  `json:"scope"`
	Error            flexString `json:"error"`
	ErrorDescription flexString `json:"error_description"`
	ErrorURI         flexString `json:"error_uri"`
	OK               *bool      `json:"ok"` // Slack: false on every failure, with HTTP 200
	raw              []byte     // the JSON answer, for fields: most answers never need them
	nested           map[string]json.RawMessage

	// AuthorizationDetails are what the server granted (RFC 9396 §7).
	AuthorizationDetails json.RawMessage `json:"authorization_details"`
}

// fields is the answer's top-level JSON fields, decoded on first use.
func (tr *tokenResponse) fields() map[string]json.RawMessage {
	if tr.nested == nil && tr.raw != nil {
		_ = json.Unmarshal(tr.raw, &tr.nested) // never fails: raw decoded into tr already
		tr.raw = nil
	}
	return tr.nested
}

// parse turns the token endpoint's answer into a TokenSet or a ProviderError.
// libErr is what x/oauth2 made of the same answer; it rides along as Err.
func (p *OAuth2) parse(a *answer, libErr error) (*oauthflow.TokenSet, error) {
	tr, err := a.decoded, error(nil)
	if tr == nil {
		tr, err = decodeTokenResponse(a)
	}
	if err != nil {
		return nil, p.fail(a, nil, joinErr(err, libErr))
	}
	p.cfg.ownError(a.status, tr)
	if failed(a.status, tr) {
		return nil, p.fail(a, tr, libErr)
	}
	tok, err := p.unnest(tr)
	if err == nil {
		tok, err = p.pick(tok)
	}
	if err != nil {
		return nil, p.fail(a, nil, err)
	}
	if tok.AccessToken == "" {
		return nil, p.fail(a, nil, ErrNoAccessToken)
	}
	if !p.cfg.acceptsTokenType(tok.TokenType) {
		return nil, p.fail(a, nil, fmt.Errorf("%w %q", ErrTokenType, tok.TokenType))
	}
	ts := &oauthflow.TokenSet{
		AccessToken:  tok.AccessToken,
		RefreshToken: tok.RefreshToken,
		ExpiresIn:    int64(tok.ExpiresIn),
		Scope:        tok.Scope.normalize(p.cfg.separator()),
	}
	ts.AuthorizationDetails = grantedDetails(tok, tr)
	if strings.EqualFold(tok.TokenType, "DPoP") {
		ts.TokenType = "DPoP" // accepted only when Config.DPoP (acceptsTokenType)
	}
	if err := p.cfg.readQuirks(ts, tr, tok); err != nil {
		return nil, p.fail(a, nil, err)
	}
	return ts, nil
}

// grantedDetails is the authorization details the answer says were granted
// (RFC 9396 §7): the token object's authorization_details, else the whole
// answer's; nil when neither is a JSON array. The library checks them
// further before it keeps them.
func grantedDetails(tok, tr *tokenResponse) json.RawMessage {
	for _, d := range []json.RawMessage{tok.AuthorizationDetails, tr.AuthorizationDetails} {
		if d = bytes.TrimSpace(d); len(d) > 0 && d[0] == '[' {
			return d
		}
	}
	return nil
}

// lifetime is the access token's lifetime in seconds from v, the
// ExpiresField's value read in ExpiresUnit at now; 0 (never expires) when v
// is empty. An absolute time already past is a lifetime of one second: the
// token is refreshed on its first read.
func (c *Config) lifetime(v string, now time.Time) (int64, error) {
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	var at time.Time
	switch c.ExpiresUnit {
	case "unix":
		n, err := parseSeconds(v)
		if err != nil {
			return 0, err
		}
		at = time.Unix(n, 0)
	case "rfc3339":
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("%w: %s %q: %w", ErrMalformedResponse, c.ExpiresField, v, err)
		}
		at = t
	default:
		return parseSeconds(v)
	}
	return max(int64(at.Sub(now)/time.Second), 1), nil
}

// unnest is the object at Config.TokenPath that holds the token fields,
// when the answer nests them; tr itself when it does not, or when the
// token is at the top level after all.
func (p *OAuth2) unnest(tr *tokenResponse) (*tokenResponse, error) {
	if p.cfg.TokenPath == "" || tr.AccessToken != "" {
		return tr, nil
	}
	cur := tr
	for seg := range strings.SplitSeq(p.cfg.TokenPath, ".") {
		raw, ok := cur.fields()[seg]
		if !ok {
			return tr, nil // no token: reported as such
		}
		var next tokenResponse
		if err := json.Unmarshal(raw, &next); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrMalformedResponse, p.cfg.TokenPath, err)
		}
		next.raw = raw
		cur = &next
	}
	return cur, nil
}

// readQuirks reads what the provider answers in its own fields: a lifetime
// under another name or unit, fields to keep, the account an ID token names.
// tok is the token object (nested or not), tr the whole answer.
func (c *Config) readQuirks(ts *oauthflow.TokenSet, tr, tok *tokenResponse) error {
	if c.ExpiresField != "" {
		n, err := c.lifetime(string(tok.field(c.ExpiresField)), time.Now())
		if err != nil {
			return err
		}
		ts.ExpiresIn = n
	}
	for _, name := range c.KeepFields {
		v := tok.field(name)
		if v == "" {
			v = tr.field(name)
		}
		if v != "" {
			if ts.Metadata == nil {
				ts.Metadata = make(map[string]string, len(c.KeepFields))
			}
			ts.Metadata[name] = string(v)
		}
	}
	if c.IDTokenField != "" {
		ts.Account = idTokenClaim(string(tok.field("id_token")), c.IDTokenField)
	}
	return nil
}

// idTokenClaim is the string claim name of an ID token's payload, "" when
// there is none. The token came from the token endpoint over TLS, which
// OpenID Connect Core §3.1.3.7 accepts in place of its signature for the
// code flow; the claim only names the account for people to recognize.
func idTokenClaim(idToken, name string) string {
	parts := strings.Split(idToken, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims map[string]any
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	v, _ := claims[name].(string)
	return v
}

// failed: a non-2xx status, an "error" field (GitHub and Slack send HTTP 200
// with one), or Slack's ok:false.
func failed(status int, tr *tokenResponse) bool {
	return status < 200 || status > 299 || tr.Error != "" || (tr.OK != nil && !*tr.OK)
}

// ownError fills the RFC 6749 error fields of an answer that failed or
// carries no access token from the fields the provider uses instead: HubSpot
// answers HTTP 400 {"status":"BAD_REFRESH_TOKEN","message":"..."}.
func (c *Config) ownError(status int, tr *tokenResponse) {
	if c.ErrorCodeField == "" || tr.Error != "" || (!failed(status, tr) && tr.AccessToken != "") {
		return
	}
	tr.Error = tr.field(c.ErrorCodeField)
	if tr.ErrorDescription == "" && c.ErrorDescriptionField != "" {
		tr.ErrorDescription = tr.field(c.ErrorDescriptionField)
	}
}

// field is the top-level JSON field name of the answer as text ("" when absent).
func (tr *tokenResponse) field(name string) flexString {
	var f flexString
	if raw, ok := tr.fields()[name]; ok {
		_ = f.UnmarshalJSON(raw) // never fails: a non-string keeps its raw text
	}
	return f
}

func (p *OAuth2) fail(a *answer, tr *tokenResponse, err error) *oauthflow.ProviderError {
	pe := &oauthflow.ProviderError{ProviderID: p.cfg.ID, StatusCode: a.status, Err: err}
	if tr != nil {
		pe.Code = clip.To(string(tr.Error), clip.ErrorCode)
		pe.Description = clip.To(string(tr.ErrorDescription), clip.ErrorDescription)
		pe.URI = clip.To(string(tr.ErrorURI), clip.ErrorURI)
	}
	if pe.Code == "" && (pe.Err == nil || tr != nil && tr.OK != nil) {
		pe.Err = joinErr(ErrMalformedResponse, err) // e.g. Slack ok:false without an error name
	}
	return pe
}

// pick chooses the top-level token or the nested user token (Slack). The
// nested one wins when UserToken is set, or when there is no top-level token
// (a Slack install that asked for user scopes only).
func (p *OAuth2) pick(tr *tokenResponse) (*tokenResponse, error) {
	if p.cfg.UserTokenField == "" {
		return tr, nil
	}
	raw, ok := tr.fields()[p.cfg.UserTokenField]
	if !ok || (!p.cfg.UserToken && tr.AccessToken != "") {
		return tr, nil
	}
	var user tokenResponse
	if err := json.Unmarshal(raw, &user); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformedResponse, p.cfg.UserTokenField, err)
	}
	if user.AccessToken == "" {
		return tr, nil
	}
	return &user, nil
}

func decodeTokenResponse(a *answer) (*tokenResponse, error) {
	media, _, _ := mime.ParseMediaType(a.contentType)
	if media == "application/x-www-form-urlencoded" || media == "text/plain" {
		return decodeForm(a.body)
	}
	if tr, ok := decodePlainTokenResponse(a.body); ok {
		return tr, nil
	}
	var tr tokenResponse
	if err := json.Unmarshal(a.body, &tr); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
	}
	tr.raw = a.body
	return &tr, nil
}

// plainTokenResponse is tokenResponse with the types nearly every provider
// sends. Decoding into it skips the flex types' own decoding, which costs more
// than the rest of the answer: a body it cannot take as it is (expires_in as a
// string, scope as an array, an error as an object) goes to the flex decode.
type plainTokenResponse struct {
	AccessToken      string `json:"access_token"`
	TokenType        string `json:"token_type"`
	RefreshToken     string `json:"refresh_token"`
	ExpiresIn        int64  `json:"expires_in"`
	Scope            string `json:"scope"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
	ErrorURI         string `json:"error_uri"`
	OK               *bool  `json:"ok"`

	// AuthorizationDetails take any JSON, as the flex decode's do.
	AuthorizationDetails json.RawMessage `json:"authorization_details"`
}

// decodePlainTokenResponse decodes body as the flex decode would, when it
// can; FuzzPlainTokenResponse holds the two to the same answers.
func decodePlainTokenResponse(body []byte) (*tokenResponse, bool) {
	var p plainTokenResponse
	if json.Unmarshal(body, &p) != nil {
		return nil, false
	}
	return &tokenResponse{AccessToken: p.AccessToken, TokenType: p.TokenType, RefreshToken: p.RefreshToken,
		ExpiresIn: flexInt(max(p.ExpiresIn, 0)), Scope: flexScope(p.Scope), Error: flexString(p.Error),
		ErrorDescription: flexString(p.ErrorDescription), ErrorURI: flexString(p.ErrorURI), OK: p.OK,
		AuthorizationDetails: p.AuthorizationDetails, raw: body}, true
}

// decodeForm reads the form-encoded answer GitHub sends without an Accept header.
func decodeForm(body []byte) (*tokenResponse, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
	}
	n, err := parseSeconds(v.Get("expires_in"))
	if err != nil {
		return nil, err
	}
	return &tokenResponse{
		AccessToken:      v.Get("access_token"),
		TokenType:        v.Get("token_type"),
		RefreshToken:     v.Get("refresh_token"),
		ExpiresIn:        flexInt(n),
		Scope:            flexScope(v.Get("scope")),
		Error:            flexString(v.Get("error")),
		ErrorDescription: flexString(v.Get("error_description")),
		ErrorURI:         flexString(v.Get("error_uri")),
	}, nil
}

func joinErr(err, libErr error) error {
	if libErr == nil {
		return err
	}
	return fmt.Errorf("%w (%w)", err, libErr)
}

// flexInt is expires_in: a JSON number or a string holding one (PayPal,
// some Microsoft endpoints). Absent, null, empty or negative is 0.
type flexInt int64

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(bytes.TrimSpace(b)), `"`)
	if s == "null" {
		s = ""
	}
	n, err := parseSeconds(s)
	*f = flexInt(n)
	return err
}

func parseSeconds(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f > 1<<53 {
			return 0, fmt.Errorf("%w: expires_in %q", ErrMalformedResponse, s)
		}
		n = int64(f)
	}
	return max(n, 0), nil
}

// flexScope is the granted scope: a string, or an array of strings (Twitch).
type flexScope string

func (f *flexScope) UnmarshalJSON(b []byte) error {
	var list []string
	if json.Unmarshal(b, &list) == nil {
		*f = flexScope(strings.Join(list, " "))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil && string(b) != "null" {
		return err
	}
	*f = flexScope(s)
	return nil
}

// normalize returns the scope as an RFC 6749 space-separated list, whatever
// separator the provider uses (Shopify and Strava use commas).
func (f flexScope) normalize(sep string) string {
	s := string(f)
	if sep != " " {
		s = strings.ReplaceAll(s, sep, " ")
	}
	return strings.Join(strings.Fields(s), " ")
}

// flexString accepts a JSON string; any other non-null value keeps its raw
// text, so an error object still counts as an error.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*f = flexString(s)
		return nil
	}
	if t := string(bytes.TrimSpace(b)); t != "null" && t != "false" {
		*f = flexString(t)
	}
	return nil
}
