package dpop_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

// The proofs of RFC 9449 Figure 3 (a token request) and Figure 12 (a
// resource request), made with one key whose thumbprint is the jkt of
// Figure 9, and the access token of Figure 12.
const (
	rfcHeader        = "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19"
	rfcTokenProof    = rfcHeader + ".eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ.2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg"
	rfcResourceProof = rfcHeader + ".eyJqdGkiOiJlMWozVl9iS2ljOC1MQUVCIiwiaHRtIjoiR0VUIiwiaHR1IjoiaHR0cHM6Ly9yZXNvdXJjZS5leGFtcGxlLm9yZy9wcm90ZWN0ZWRyZXNvdXJjZSIsImlhdCI6MTU2MjI2MjYxOCwiYXRoIjoiZlVIeU8ycjJaM0RaNTNFc05yV0JiMHhXWG9hTnk1OUlpS0NBcWtzbVFFbyJ9.2oW9RP35yRqzhrtNP86L-Ey71EOptxRimPPToA1plemAgR6pxHF8y6-yqyVnmcw6Fy1dqd-jfxSYoMxhAJpLjA"
	rfcJKT           = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
	rfcAccessToken   = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
)

// TestVerifyRFCExamples checks Verify, and the thumbprint it returns, against
// proofs another implementation signed.
func TestVerifyRFCExamples(t *testing.T) {
	t.Parallel()
	jkt, err := dpop.Verify(rfcTokenProof, "POST", "https://server.example.com/token", time.Unix(1562262616, 0), 0, "", "")
	if err != nil || jkt != rfcJKT {
		t.Fatalf("token request proof: %q, %v; want %q", jkt, err, rfcJKT)
	}
	jkt, err = dpop.Verify(rfcResourceProof, "GET", "https://resource.example.org/protectedresource", time.Unix(1562262618, 0), 0, rfcAccessToken, "")
	if err != nil || jkt != rfcJKT {
		t.Fatalf("resource request proof: %q, %v; want %q", jkt, err, rfcJKT)
	}
	if _, err := dpop.Verify(rfcResourceProof, "GET", "https://resource.example.org/protectedresource", time.Unix(1562262618, 0), 0, rfcAccessToken+"x", ""); !errors.Is(err, dpop.ErrInvalidProof) {
		t.Fatalf("resource request proof with another token: %v, want ErrInvalidProof", err)
	}
}

func TestProofVerifies(t *testing.T) {
	t.Parallel()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name, method, sentTo, seenAt, token, nonce string
	}{
		{"token request", "POST", "https://as.example/token", "https://as.example/token", "", ""},
		{"with nonce", "POST", "https://as.example/token", "https://as.example/token", "", "n-1"},
		{"resource request", "GET", "https://rs.example/mcp", "https://rs.example/mcp", "tok", ""},
		{"resource request with nonce", "GET", "https://rs.example/mcp", "https://rs.example/mcp", "tok", "n-2"},
		{"query and fragment differ", "GET", "https://rs.example/r?a=1#x", "https://rs.example/r?b=2", "", ""},
		{"spelled differently", "GET", "https://RS.example:443/r", "https://rs.example/r", "", ""},
		{"loopback with port", "POST", "http://127.0.0.1:8080/token", "http://127.0.0.1:8080/token", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proof, err := k.Proof(tc.method, tc.sentTo, now, tc.token, tc.nonce)
			if err != nil {
				t.Fatal(err)
			}
			jkt, err := dpop.Verify(proof, tc.method, tc.seenAt, now, time.Minute, tc.token, tc.nonce)
			if err != nil || jkt != k.Thumbprint() {
				t.Fatalf("Verify = %q, %v; want %q", jkt, err, k.Thumbprint())
			}
		})
	}
}

// TestVerifyRefuses proves each of Verify's checks: every case breaks one
// thing about a proof that is otherwise valid (the first case), and names
// the reason Verify must give, so that a check that is missing, or only
// caught by accident by another, fails the case.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	s, other := newSigner(t), newSigner(t)
	const (
		method, target = "POST", "https://as.example/token"
		token, nonce   = "tok", "n-1"
	)
	now := time.Unix(1_700_000_000, 0)
	claims := func() map[string]any {
		return map[string]any{"jti": "j-1", "htm": method, "htu": target, "iat": now.Unix(), "ath": hashOf(token), "nonce": nonce}
	}
	signed := func(header func(h map[string]any), claim func(c map[string]any)) string {
		h, c := s.header(), claims()
		header(h)
		claim(c)
		return s.sign(t, h, c)
	}
	headerOnly := func(f func(h map[string]any)) string { return signed(f, func(map[string]any) {}) }
	claimOnly := func(f func(c map[string]any)) string { return signed(func(map[string]any) {}, f) }
	jwk := func(f func(j map[string]any)) string {
		return headerOnly(func(h map[string]any) { f(h["jwk"].(map[string]any)) })
	}
	valid := signed(func(map[string]any) {}, func(map[string]any) {})
	seg := strings.Split(valid, ".")
	flipLast := func(s string) string { // a different last character, still base64url
		if strings.HasSuffix(s, "A") {
			return s[:len(s)-1] + "B"
		}
		return s[:len(s)-1] + "A"
	}
	// padBits sets a padding bit of the last character: the same bytes, but
	// not their canonical encoding.
	padBits := func(s string) string {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, s[len(s)-1])
		return s[:len(s)-1] + string(alphabet[last|1])
	}
	d := enc.EncodeToString(s.priv.D.Bytes())
	x, _ := enc.DecodeString(s.jwk["x"].(string))

	type verifyCase struct {
		name, proof string
		maxAge      time.Duration
		wantErr     error  // nil: accepted
		reason      string // in the error's text
	}
	cases := []verifyCase{
		{name: "valid", proof: valid},

		{name: "two segments", proof: seg[0] + "." + seg[1], wantErr: dpop.ErrInvalidProof, reason: "compact JWS"},
		{name: "four segments", proof: valid + ".x", wantErr: dpop.ErrInvalidProof, reason: "compact JWS"},
		{name: "header not base64url", proof: "e30=." + seg[1] + "." + seg[2], wantErr: dpop.ErrInvalidProof, reason: "header"},
		{name: "header not JSON", proof: s.signSegments(t, enc.EncodeToString([]byte("{")), seg[1]), wantErr: dpop.ErrInvalidProof, reason: "header"},
		{name: "payload not JSON", proof: s.signSegments(t, seg[0], enc.EncodeToString([]byte("[1]"))), wantErr: dpop.ErrInvalidProof, reason: "payload"},
		{name: "payload with trailing data", proof: s.signSegments(t, seg[0], enc.EncodeToString([]byte(`{"jti":"j"} {}`))), wantErr: dpop.ErrInvalidProof, reason: "payload"},

		{name: "typ JWT", proof: headerOnly(func(h map[string]any) { h["typ"] = "JWT" }), wantErr: dpop.ErrInvalidProof, reason: "typ"},
		{name: "typ missing", proof: headerOnly(func(h map[string]any) { delete(h, "typ") }), wantErr: dpop.ErrInvalidProof, reason: "typ"},
		{name: "typ as media type", proof: headerOnly(func(h map[string]any) { h["typ"] = "application/dpop+jwt" })},
		{name: "typ in other case", proof: headerOnly(func(h map[string]any) { h["typ"] = "DPoP+JWT" })},
		{name: "alg none", proof: headerOnly(func(h map[string]any) { h["alg"] = "none" }), wantErr: dpop.ErrInvalidProof, reason: "alg"},
		{name: "alg HS256", proof: headerOnly(func(h map[string]any) { h["alg"] = "HS256" }), wantErr: dpop.ErrInvalidProof, reason: "alg"},
		{name: "alg ES384", proof: headerOnly(func(h map[string]any) { h["alg"] = "ES384" }), wantErr: dpop.ErrInvalidProof, reason: "alg"},
		{name: "alg missing", proof: headerOnly(func(h map[string]any) { delete(h, "alg") }), wantErr: dpop.ErrInvalidProof, reason: "alg"},
		{name: "crit", proof: headerOnly(func(h map[string]any) { h["crit"] = []string{"exp"} }), wantErr: dpop.ErrInvalidProof, reason: "crit"},

		{name: "jwk missing", proof: headerOnly(func(h map[string]any) { delete(h, "jwk") }), wantErr: dpop.ErrInvalidProof, reason: "jwk member"},
		{name: "jwk kty RSA", proof: jwk(func(j map[string]any) { j["kty"] = "RSA" }), wantErr: dpop.ErrInvalidProof, reason: "EC P-256"},
		{name: "jwk crv P-384", proof: jwk(func(j map[string]any) { j["crv"] = "P-384" }), wantErr: dpop.ErrInvalidProof, reason: "EC P-256"},
		{name: "jwk kty missing", proof: jwk(func(j map[string]any) { delete(j, "kty") }), wantErr: dpop.ErrInvalidProof, reason: "jwk member"},
		{name: "jwk y a number", proof: jwk(func(j map[string]any) { j["y"] = 7 }), wantErr: dpop.ErrInvalidProof, reason: "jwk member"},
		{name: "jwk x short", proof: jwk(func(j map[string]any) { j["x"] = enc.EncodeToString(x[1:]) }), wantErr: dpop.ErrInvalidProof, reason: "coordinates"},
		{name: "jwk y short", proof: jwk(func(j map[string]any) { j["y"] = enc.EncodeToString(x[1:]) }), wantErr: dpop.ErrInvalidProof, reason: "coordinates"},
		{name: "jwk x long", proof: jwk(func(j map[string]any) { j["x"] = enc.EncodeToString(append(x, 0)) }), wantErr: dpop.ErrInvalidProof, reason: "coordinates"},
		{name: "jwk x not canonical base64url", proof: jwk(func(j map[string]any) { j["x"] = padBits(j["x"].(string)) }), wantErr: dpop.ErrInvalidProof, reason: "coordinates"},
		{name: "jwk y not canonical base64url", proof: jwk(func(j map[string]any) { j["y"] = padBits(j["y"].(string)) }), wantErr: dpop.ErrInvalidProof, reason: "coordinates"},
		{name: "jwk x padded", proof: jwk(func(j map[string]any) { j["x"] = j["x"].(string) + "=" }), wantErr: dpop.ErrInvalidProof, reason: "coordinates"},
		{name: "jwk point off the curve", proof: jwk(func(j map[string]any) { j["y"] = j["x"] }), wantErr: dpop.ErrInvalidProof, reason: "jwk: "},
		{name: "jwk of another key", proof: headerOnly(func(h map[string]any) { h["jwk"] = other.jwk }), wantErr: dpop.ErrInvalidProof, reason: "signature does not verify"},

		{name: "signature changed", proof: seg[0] + "." + seg[1] + "." + flipLast(seg[2][:len(seg[2])-1]) + seg[2][len(seg[2])-1:], wantErr: dpop.ErrInvalidProof, reason: "signature does not verify"},
		{name: "signature short", proof: seg[0] + "." + seg[1] + "." + seg[2][:84], wantErr: dpop.ErrInvalidProof, reason: "64 bytes"},
		{name: "signature padded", proof: valid + "==", wantErr: dpop.ErrInvalidProof, reason: "64 bytes"},
		{name: "signature not canonical base64url", proof: seg[0] + "." + seg[1] + "." + padBits(seg[2]), wantErr: dpop.ErrInvalidProof, reason: "64 bytes"},
		{name: "signature missing", proof: seg[0] + "." + seg[1] + ".", wantErr: dpop.ErrInvalidProof, reason: "64 bytes"},
		{name: "signature of other claims", proof: seg[0] + "." + strings.Split(claimOnly(func(c map[string]any) { c["htm"] = "GET" }), ".")[1] + "." + seg[2], wantErr: dpop.ErrInvalidProof, reason: "signature does not verify"},

		{name: "jti missing", proof: claimOnly(func(c map[string]any) { delete(c, "jti") }), wantErr: dpop.ErrInvalidProof, reason: "jti"},
		{name: "htm GET", proof: claimOnly(func(c map[string]any) { c["htm"] = "GET" }), wantErr: dpop.ErrInvalidProof, reason: "htm"},
		{name: "htm lower case", proof: claimOnly(func(c map[string]any) { c["htm"] = "post" }), wantErr: dpop.ErrInvalidProof, reason: "htm"},
		{name: "htu other path", proof: claimOnly(func(c map[string]any) { c["htu"] = "https://as.example/authorize" }), wantErr: dpop.ErrInvalidProof, reason: "htu"},
		{name: "htu other host", proof: claimOnly(func(c map[string]any) { c["htu"] = "https://evil.example/token" }), wantErr: dpop.ErrInvalidProof, reason: "htu"},
		{name: "htu http", proof: claimOnly(func(c map[string]any) { c["htu"] = "http://as.example/token" }), wantErr: dpop.ErrInvalidProof, reason: "htu"},
		{name: "htu other port", proof: claimOnly(func(c map[string]any) { c["htu"] = "https://as.example:8443/token" }), wantErr: dpop.ErrInvalidProof, reason: "htu"},
		{name: "htu missing", proof: claimOnly(func(c map[string]any) { delete(c, "htu") }), wantErr: dpop.ErrInvalidProof, reason: "htu"},
		{name: "htu with query", proof: claimOnly(func(c map[string]any) { c["htu"] = target + "?x=1" })},

		{name: "iat a minute and a second ago", proof: claimOnly(func(c map[string]any) { c["iat"] = now.Unix() - 61 }), wantErr: dpop.ErrInvalidProof, reason: "iat"},
		{name: "iat a minute and a second ahead", proof: claimOnly(func(c map[string]any) { c["iat"] = now.Unix() + 61 }), wantErr: dpop.ErrInvalidProof, reason: "iat"},
		{name: "iat a minute ago", proof: claimOnly(func(c map[string]any) { c["iat"] = now.Unix() - 60 })},
		{name: "iat a minute ahead", proof: claimOnly(func(c map[string]any) { c["iat"] = now.Unix() + 60 })},
		{name: "iat missing", proof: claimOnly(func(c map[string]any) { delete(c, "iat") }), wantErr: dpop.ErrInvalidProof, reason: "iat"},
		{name: "iat a string", proof: claimOnly(func(c map[string]any) { c["iat"] = "1700000000" }), wantErr: dpop.ErrInvalidProof, reason: "payload"},
		{name: "iat past maxAge", maxAge: 10 * time.Second, proof: claimOnly(func(c map[string]any) { c["iat"] = now.Unix() - 11 }), wantErr: dpop.ErrInvalidProof, reason: "iat"},
		{name: "iat within maxAge", maxAge: 10 * time.Minute, proof: claimOnly(func(c map[string]any) { c["iat"] = now.Unix() - 500 })},
		{name: "iat past the default", maxAge: -1, proof: claimOnly(func(c map[string]any) { c["iat"] = now.Unix() - 61 }), wantErr: dpop.ErrInvalidProof, reason: "iat"},
		{name: "iat within the default", maxAge: -1, proof: claimOnly(func(c map[string]any) { c["iat"] = now.Unix() - 59 })},

		{name: "ath missing", proof: claimOnly(func(c map[string]any) { delete(c, "ath") }), wantErr: dpop.ErrInvalidProof, reason: "ath"},
		{name: "ath of another token", proof: claimOnly(func(c map[string]any) { c["ath"] = hashOf("other") }), wantErr: dpop.ErrInvalidProof, reason: "ath"},
		{name: "ath the token itself", proof: claimOnly(func(c map[string]any) { c["ath"] = token }), wantErr: dpop.ErrInvalidProof, reason: "ath"},

		{name: "nonce missing", proof: claimOnly(func(c map[string]any) { delete(c, "nonce") }), wantErr: dpop.ErrUseNonce},
		{name: "nonce stale", proof: claimOnly(func(c map[string]any) { c["nonce"] = "n-0" }), wantErr: dpop.ErrUseNonce},
	}
	for _, name := range []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"} {
		cases = append(cases, verifyCase{
			name: "jwk with private member " + name, proof: jwk(func(j map[string]any) { j[name] = d }),
			wantErr: dpop.ErrInvalidProof, reason: "private",
		})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			maxAge := tc.maxAge
			if maxAge == 0 {
				maxAge = time.Minute
			}
			jkt, err := dpop.Verify(tc.proof, method, target, now, maxAge, token, nonce)
			if tc.wantErr == nil {
				if err != nil || jkt != hashOf(`{"crv":"P-256","kty":"EC","x":"`+s.jwk["x"].(string)+`","y":"`+s.jwk["y"].(string)+`"}`) {
					t.Fatalf("Verify = %q, %v; want the signer's thumbprint", jkt, err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.reason) || jkt != "" {
				t.Fatalf("Verify = %q, %v; want %v for %q", jkt, err, tc.wantErr, tc.reason)
			}
			if errors.Is(tc.wantErr, dpop.ErrUseNonce) == errors.Is(err, dpop.ErrInvalidProof) {
				t.Fatalf("Verify = %v: a nonce refusal is ErrUseNonce alone, any other ErrInvalidProof", err)
			}
		})
	}
}

// TestVerifyOptionalBindings: without an access token or a nonce to check,
// Verify accepts a proof that has them or not.
func TestVerifyOptionalBindings(t *testing.T) {
	t.Parallel()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	proof, err := k.Proof("GET", "https://rs.example/r", now, "tok", "n-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dpop.Verify(proof, "GET", "https://rs.example/r", now, 0, "", ""); err != nil {
		t.Fatalf("Verify without token or nonce: %v", err)
	}
}

func TestVerifyRefusesABadTarget(t *testing.T) {
	t.Parallel()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	proof, err := k.Proof("GET", "https://rs.example/r", now, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// The server's own mistake, not the proof's.
	if _, err := dpop.Verify(proof, "GET", "/r", now, 0, "", ""); err == nil || errors.Is(err, dpop.ErrInvalidProof) {
		t.Fatalf("Verify against a relative target = %v; want an error that is not ErrInvalidProof", err)
	}
}
