package authserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

// DPoP (RFC 9449) as Options.DPoP, RequireDPoP and DPoPNonces ask for it.
const (
	headerDPoP  = "DPoP"
	headerNonce = "DPoP-Nonce"
	// dpopAlg is the one algorithm internal/dpop signs and verifies proofs with.
	dpopAlg = "ES256"
	// dpopAlgsParam is the algs parameter of the DPoP challenges of the protected
	// endpoints (§7.1).
	dpopAlgsParam = `algs="` + dpopAlg + `"`

	errInvalidDPoPProof = "invalid_dpop_proof"
	errUseDPoPNonce     = "use_dpop_nonce"
)

var (
	// errProofCount refuses a request with more than one DPoP header (RFC 9449 §4.3).
	errProofCount = fmt.Errorf("%w: more than one DPoP header", dpop.ErrInvalidProof)
	// errProofReplayed refuses a proof whose jti the server accepted before (§11.1).
	errProofReplayed = fmt.Errorf("%w: its jti was used before", dpop.ErrInvalidProof)
)

// tokenType is the token_type of an access token bound to jkt ("" for none).
func tokenType(jkt string) string {
	if jkt != "" {
		return schemeDPoP
	}
	return schemeBearer
}

// RotateDPoPNonce replaces the nonce Options.DPoPNonces demands and returns the
// new one. A client holding the old one is answered use_dpop_nonce, once.
func (s *Server) RotateDPoPNonce() string {
	nonce := newSecret()
	s.nonce.Store(&nonce)
	return nonce
}

// DPoPNonce is the nonce Options.DPoPNonces demands now.
func (s *Server) DPoPNonce() string { return *s.nonce.Load() }

// offerNonce sends the current nonce in w's DPoP-Nonce header and returns it, or
// returns "" when the server demands none.
func (s *Server) offerNonce(w http.ResponseWriter) string {
	if !s.opts.DPoPNonces {
		return ""
	}
	nonce := s.DPoPNonce()
	w.Header().Set(headerNonce, nonce)
	return nonce
}

// requestedKey is the dpop_jkt of an authorization request (RFC 9449 §10), the key
// its code is bound to. A server without DPoP ignores it.
func (s *Server) requestedKey(q url.Values) (string, *oauthError) {
	jkt := q.Get("dpop_jkt")
	if !s.opts.DPoP || jkt == "" {
		return "", nil
	}
	if b, err := base64.RawURLEncoding.Strict().DecodeString(jkt); err != nil || len(b) != sha256.Size {
		return "", errInvalidRequest("dpop_jkt is not a JWK SHA-256 thumbprint")
	}
	return jkt, nil
}

// tokenProof checks the DPoP proof of a token request (RFC 9449 §5) and returns the
// thumbprint of its key; "" for a request without one, or to a server without DPoP,
// which ignores the header.
func (s *Server) tokenProof(r *http.Request, nonce string) (string, *oauthError) {
	proofs := r.Header.Values(headerDPoP)
	switch {
	case !s.opts.DPoP:
		return "", nil
	case len(proofs) == 0 && s.opts.RequireDPoP:
		s.stats.dpopProofsMissing.Add(1)
		return "", newError(http.StatusBadRequest, errInvalidDPoPProof, "a DPoP proof is required")
	case len(proofs) == 0:
		return "", nil
	}
	jkt, err := s.verifyProof(proofs, http.MethodPost, s.issuerFor(r)+PathToken, "", nonce)
	if err != nil {
		code, desc := proofRefusal(err)
		return "", newError(http.StatusBadRequest, code, desc)
	}
	return jkt, nil
}

// checkBinding refuses a code or refresh token (what) bound to the key want unless
// the token request proved that key (got).
func (s *Server) checkBinding(want, got, what string) *oauthError {
	switch {
	case want == "" || want == got:
		return nil
	case got == "":
		s.stats.dpopProofsMissing.Add(1)
		return errInvalidGrant(what + " is bound to a DPoP key; the request must prove it")
	}
	s.stats.dpopKeyMismatches.Add(1)
	return errInvalidGrant(what + " is bound to another DPoP key")
}

// resourceProof checks that a request to the protected endpoint at path presents
// the access token tok, bound to jkt ("" for none), the way it must (RFC 9449 §7):
// a bearer token with the Bearer scheme, a bound one with the DPoP scheme and a
// proof of its key. A bearer token is bound to no key, so no proof makes it good
// with the DPoP scheme.
func (s *Server) resourceProof(r *http.Request, path, scheme, tok, jkt, nonce string) *apiRefusal {
	switch {
	case scheme == schemeBearer && jkt == "":
		return nil
	case scheme == schemeBearer:
		s.stats.dpopProofsMissing.Add(1)
		return &apiRefusal{schemeDPoP, "invalid_token", "the access token is DPoP-bound: send it with the DPoP scheme and a proof"}
	}
	proofs := r.Header.Values(headerDPoP)
	if len(proofs) == 0 {
		s.stats.dpopProofsMissing.Add(1)
		return &apiRefusal{schemeDPoP, "invalid_token", "a DPoP proof is required"}
	}
	got, err := s.verifyProof(proofs, r.Method, s.issuerFor(r)+path, tok, nonce)
	if err != nil {
		code, desc := proofRefusal(err)
		return &apiRefusal{schemeDPoP, code, desc}
	}
	if got != jkt {
		s.stats.dpopKeyMismatches.Add(1)
		return &apiRefusal{schemeDPoP, "invalid_token", "the access token is not bound to the DPoP proof's key"}
	}
	return nil
}

// verifyProof checks a request's proofs, counts the outcome and returns the
// thumbprint of the proof's key.
func (s *Server) verifyProof(proofs []string, method, target, accessToken, nonce string) (string, error) {
	jkt, err := s.checkProof(proofs, method, target, accessToken, nonce)
	s.stats.countProof(err)
	return jkt, err
}

// checkProof accepts exactly one proof, valid for the request (dpop.Verify) and
// never accepted before; accepting it spends its jti.
func (s *Server) checkProof(proofs []string, method, target, accessToken, nonce string) (string, error) {
	if len(proofs) != 1 {
		return "", errProofCount
	}
	now := s.now()
	jkt, err := dpop.Verify(proofs[0], method, target, now, dpop.DefaultMaxAge, accessToken, nonce)
	if err != nil {
		return "", err
	}
	jti, iat := proofID(proofs[0])
	if !s.proofs.spend(jkt+" "+jti, iat.Add(dpop.DefaultMaxAge), now) {
		return "", errProofReplayed
	}
	return jkt, nil
}

// proofID reads the jti and iat of a proof dpop.Verify accepted, which it does not
// return: the proof is a compact JWS whose payload decodes.
func proofID(proof string) (jti string, iat time.Time) {
	parts := strings.Split(proof, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct {
		JTI string  `json:"jti"`
		IAT float64 `json:"iat"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.JTI, time.Unix(0, int64(c.IAT*float64(time.Second)))
}

// proofRefusal is the error code and description that answer a refused proof.
// The verifier's own message is not echoed.
func proofRefusal(err error) (code, desc string) {
	switch {
	case errors.Is(err, dpop.ErrUseNonce):
		return errUseDPoPNonce, "the DPoP proof must carry the server's current nonce"
	case errors.Is(err, errProofReplayed):
		return errInvalidDPoPProof, "the DPoP proof was used before"
	}
	return errInvalidDPoPProof, "the DPoP proof is invalid"
}
