package mcpauth

import (
	"context"
	"crypto"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/clientauth"
	"github.com/oauthflow/oauthflow/internal/clip"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"golang.org/x/oauth2"
)

// The client credentials grant, for MCP servers an agent reaches as itself
// rather than as a user (SEP-1046): the client authenticates with its secret
// in the Basic header (client_secret_basic) or with a JWT it signs
// (private_key_jwt, RFC 7523), and asks for a token for the server's
// resource. Its tokens live in the store like a user's, under the user ID
// the app gives the agent, and are fetched again (as a refresh) when they
// expire: the provider answers a refresh with a new grant.

// ccRefreshMark stands in for the refresh token that a client credentials
// grant never gives, so that the store fetches a new token on expiry.
const ccRefreshMark = "client_credentials"

// ccSuffix ends the provider ID of a server reached with client credentials.
const ccSuffix = "-cc"

// ccProvider is an MCP server reached by a grant of the agent's own: client
// credentials, cross-app access, or the workload's JWT ([Connector.ConnectAsWorkload]).
type ccProvider struct {
	id       string
	conn     *Connector // its clients are read at each grant, so a rotated secret is used at once
	d        Discovered
	scopes   []string
	http     *http.Client // under the outbound policy: the server's token endpoint
	idp      *http.Client // the app's identity provider (Config.CrossApp), which may be internal
	issuer   string       // the audience of the client's JWT assertion, the ID-JAG and the workload's JWT: a proven issuer (audience)
	tokenURL string
	crossApp *CrossApp // set: the user's IdP grants the assertion (cross-app access)
	workload *Workload // set: the workload's platform gives the assertion (workload identity federation)
}

func (p *ccProvider) ProviderID() string      { return p.id }
func (p *ccProvider) DefaultScopes() []string { return p.scopes }
func (p *ccProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return "" // no user sign-in: nothing to open
}
func (p *ccProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return nil, fmt.Errorf("%w: %s is reached with client credentials, not sign-ins", oauthflow.ErrInvalidArgument, p.id)
}

// RefreshToken fetches a new token with the grant again: for cross-app
// access and workload identity federation, for the user the stored mark
// names. A bound grant proves the key its record keeps, which the store
// gives in ctx.
func (p *ccProvider) RefreshToken(ctx context.Context, mark string) (*oauthflow.TokenSet, error) {
	userID, ok := strings.CutPrefix(mark, crossAppRefreshMark)
	if !ok {
		userID, _ = strings.CutPrefix(mark, workloadRefreshMark)
	}
	return p.grant(ctx, userID, nil)
}

// grant asks the token endpoint for a token: with the client's
// credentials, or, for cross-app access, with the identity assertion the
// IdP grants for userID, or, for a workload, with its platform's JWT. key
// is a first grant's new key, for an authorization server that takes DPoP;
// nil on a refresh (see tokenClient).
func (p *ccProvider) grant(ctx context.Context, userID string, key *dpop.Key) (*oauthflow.TokenSet, error) {
	if p.workload != nil {
		return p.workloadGrant(ctx, userID, key)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {p.d.Resource}}
	if p.crossApp != nil {
		if userID == "" {
			return nil, fmt.Errorf("%w: a cross-app token names no user", oauthflow.ErrNoToken)
		}
		jag, err := p.crossApp.assertionGrant(ctx, userID, p.id, p.issuer, p.d.Resource, p.idp)
		if err != nil {
			return nil, err
		}
		form = url.Values{"grant_type": {jwtBearerGrant}, "assertion": {jag}, "resource": {p.d.Resource}}
	}
	cl, err := p.currentClient()
	if err != nil {
		return nil, err
	}
	a, err := p.post(ctx, form, &cl, key)
	if err != nil {
		return nil, err
	}
	mark := ccRefreshMark
	if p.crossApp != nil {
		mark = crossAppRefreshMark + userID
	}
	return &oauthflow.TokenSet{AccessToken: a.AccessToken, RefreshToken: mark, ExpiresIn: a.ExpiresIn, Scope: a.Scope,
		TokenType: a.TokenType}, nil
}

// post sends a grant's form to the token endpoint with p's scopes and cl's
// client authentication (none when cl is nil), and a proof of key where
// tokenClient says so. The answer's TokenType is "DPoP" for a token bound
// to the key proved, else "".
func (p *ccProvider) post(ctx context.Context, form url.Values, cl *Client, key *dpop.Key) (tokenAnswer, error) {
	if len(p.scopes) > 0 {
		form.Set("scope", strings.Join(p.scopes, " "))
	}
	basic, signer, err := p.authenticate(form, cl)
	if err != nil {
		return tokenAnswer{}, err
	}
	if !basic {
		cl = nil
	}
	client, watch, err := p.tokenClient(ctx, key, signer)
	if err != nil {
		return tokenAnswer{}, err
	}
	a, err := postToken(ctx, client, p.id, p.tokenURL, form, cl)
	if err != nil {
		return tokenAnswer{}, err
	}
	return a, p.bindAnswer(&a, watch.proved.Load())
}

// authenticate adds cl's client authentication to form, or says where it
// goes instead: in the Basic header (client_secret_basic), or, for
// private_key_jwt, in a client assertion the signer puts in each request
// sent (see tokenClient). A nil cl adds none.
func (p *ccProvider) authenticate(form url.Values, cl *Client) (basic bool, s *clientauth.Signer, err error) {
	if cl == nil {
		return false, nil, nil
	}
	switch cl.authMethod() {
	case "private_key_jwt":
		s, err := p.signer(*cl)
		return false, s, err
	case "client_secret_post":
		form.Set("client_id", cl.ID)
		form.Set("client_secret", cl.Secret)
	case "none":
		form.Set("client_id", cl.ID)
	default:
		return true, nil, nil
	}
	return false, nil, nil
}

// tokenAnswer is a token endpoint's answer.
type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// postToken posts form to a token endpoint, with basic's credentials in the
// Basic header when set, and reads the answer; anything but a token is a
// *oauthflow.ProviderError.
func postToken(ctx context.Context, client *http.Client, id, tokenURL string, form url.Values, basic *Client) (tokenAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return tokenAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic != nil {
		req.SetBasicAuth(url.QueryEscape(basic.ID), url.QueryEscape(basic.Secret))
	}
	resp, err := client.Do(req)
	if err != nil {
		return tokenAnswer{}, &oauthflow.ProviderError{ProviderID: id, Err: err}
	}
	defer resp.Body.Close()
	var a tokenAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRegistration)).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || a.AccessToken == "" {
		return tokenAnswer{}, &oauthflow.ProviderError{ProviderID: id, StatusCode: resp.StatusCode, Code: clip.To(a.Error, clip.ErrorCode),
			Description: clip.To(a.Description, clip.ErrorDescription), Err: err}
	}
	return a, nil
}

// signer signs the client's JWTs (RFC 7523), one for each token request
// sent: issued by and about the client, for the authorization server's
// issuer.
func (p *ccProvider) signer(cl Client) (*clientauth.Signer, error) {
	key, alg, err := signingKey(cl)
	if err != nil {
		return nil, err
	}
	s, err := clientauth.NewSigner(clientauth.Config{ClientID: cl.ID, Audience: p.issuer, Key: key, KeyID: cl.KeyID, Alg: alg})
	if err != nil {
		return nil, fmt.Errorf("mcpauth: %w", err)
	}
	return s, nil
}

// asserting is base signing a new client assertion into each request with
// s, or base itself when s is nil.
func asserting(base http.RoundTripper, s *clientauth.Signer) http.RoundTripper {
	if s == nil {
		return base
	}
	return &assertionTransport{base: base, signer: s}
}

// assertionTransport puts the client's authentication in the form of each
// token request it sends (RFC 7521 §4.2): client_id, client_assertion_type
// and a new client assertion. It sits under a grant's DPoP proofs, so that
// the retry after a use_dpop_nonce answer carries an assertion, and a jti,
// of its own: a server that takes each jti once (RFC 7523 §3) takes both.
type assertionTransport struct {
	base   http.RoundTripper
	signer *clientauth.Signer
}

func (t *assertionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	form, err := readForm(req)
	if err != nil {
		return nil, err
	}
	if err := t.signer.Authenticate(form); err != nil {
		return nil, fmt.Errorf("mcpauth: %w", err)
	}
	body := form.Encode()
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(strings.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	return t.base.RoundTrip(out)
}

// readForm reads and closes the form a token request carries, which
// postToken made: one past maxRegistration bytes is refused, never cut.
func readForm(req *http.Request) (url.Values, error) {
	if req.Body == nil {
		return url.Values{}, nil
	}
	raw, err := io.ReadAll(io.LimitReader(req.Body, maxRegistration+1))
	req.Body.Close()
	switch {
	case err != nil:
		return nil, fmt.Errorf("mcpauth: reading a token request: %w", err)
	case len(raw) > maxRegistration:
		return nil, fmt.Errorf("mcpauth: a token request of over %d bytes", maxRegistration)
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, fmt.Errorf("mcpauth: a token request's form: %w", err)
	}
	return form, nil
}

// signingKey parses the client's PEM key (PKCS#8, or SEC 1 / PKCS#1) and
// names its algorithm: the client's SigningAlg, else the key's own, RS256
// for an RSA key as it always was here.
func signingKey(c Client) (crypto.Signer, string, error) {
	key, err := clientauth.ParsePEM(c.PrivateKeyPEM)
	if err != nil {
		return nil, "", fmt.Errorf("mcpauth: %w", err)
	}
	alg := c.SigningAlg
	if _, isRSA := key.Public().(*rsa.PublicKey); isRSA && alg == "" {
		alg = clientauth.RS256
	}
	return key, alg, nil
}

// ConnectAsClient connects the MCP server at serverURL for the agent itself:
// discovery (with ch, the challenge of the server's 401, when there is
// one), a provider that fetches tokens with the client credentials of
// Config.Clients for the server's verified issuer (for a 2025-03-26 server,
// its origin: a claimed issuer selects nothing), and a first token stored for
// userID, the app's name for the agent. It returns the provider ID; reads of
// userID's token for it fetch a new one when it expires.
func (c *Connector) ConnectAsClient(ctx context.Context, serverURL, userID string, ch Challenge) (string, error) {
	return c.connectGrant(ctx, serverURL, userID, ch, ccSuffix)
}

// connectGrant connects serverURL for userID with a grant that needs no
// sign-in: client credentials, or cross-app access for the xaaSuffix, or
// the workload's JWT for the workloadSuffix.
func (c *Connector) connectGrant(ctx context.Context, serverURL, userID string, ch Challenge, suffix string) (string, error) {
	base, err := ProviderID(serverURL)
	if err != nil {
		return "", err
	}
	id := base + suffix
	d, err := discover(ctx, c.http, serverURL, ch)
	if err != nil {
		return "", err
	}
	scopes := defaultScopes(d, ch)
	p, err := c.clientProvider(id, *d, scopes)
	if err != nil {
		return "", err
	}
	// An instance that meets the provider first rebuilds it from this (resolve).
	if err := c.save(ctx, id, &server{URL: serverURL, Discovery: *d, Scopes: scopes, Saved: time.Now()}); err != nil {
		return "", err
	}
	if err := c.cfg.Module.Registry.Register(p); err != nil && !c.cfg.Module.Registry.Has(id) {
		return "", err
	}
	if err := p.firstGrant(ctx, userID); err != nil {
		return "", err
	}
	return id, nil
}

// clientProvider is the provider of the server d describes, reached with
// the client's own credentials (Config.Clients), or through Config.CrossApp
// for an ID with the xaaSuffix, or as Config.Workload for an ID with the
// workloadSuffix.
func (c *Connector) clientProvider(id string, d Discovered, scopes []string) (*ccProvider, error) {
	var idp *CrossApp
	if strings.HasSuffix(id, xaaSuffix) {
		if idp = c.cfg.CrossApp; idp == nil {
			return nil, fmt.Errorf("%w: %s needs Config.CrossApp", oauthflow.ErrUnknownProvider, id)
		}
	}
	p := &ccProvider{id: id, conn: c, d: d, scopes: scopes, http: c.http, idp: appClient(c.cfg),
		issuer: audience(&d), tokenURL: d.AS.TokenEndpoint, crossApp: idp}
	if strings.HasSuffix(id, workloadSuffix) {
		return c.workloadProvider(p)
	}
	if _, err := p.currentClient(); err != nil {
		return nil, err
	}
	return p, nil
}

// currentClient is the app's client for p's authorization server, read at
// each use so that a rotated secret is used at once: the one configured for
// its verified issuer, never for a 2025-03-26 server's claim (the secret
// would go to the claimant).
func (p *ccProvider) currentClient() (Client, error) {
	issuer := verifiedIssuer(&p.d)
	if cl, ok := p.conn.presetClient(issuer); ok {
		return cl, nil
	}
	return Client{}, fmt.Errorf("%w: no client credentials are configured for %s (Config.Clients)", ErrRegistration, issuer)
}

// audience is the authorization server as a client assertion and an
// ID-JAG name it: its issuer where discovery proved it, else the origin
// that served its metadata, so that an assertion made for a server that
// claims another's issuer is worth nothing at that other server.
func audience(d *Discovered) string {
	if d.issuerProven() {
		return d.AS.Issuer
	}
	return verifiedIssuer(d)
}

// grantID reports whether id is a provider of a grant that needs no sign-in
// (client credentials, cross-app access, workload identity): each instance
// rebuilds it from the stored server record as that grant.
func grantID(id string) bool {
	return strings.HasSuffix(id, ccSuffix) || strings.HasSuffix(id, xaaSuffix) || strings.HasSuffix(id, workloadSuffix)
}
