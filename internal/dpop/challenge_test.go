package dpop_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

func TestChallenge(t *testing.T) {
	t.Parallel()
	const useNonce = `{"error":"use_dpop_nonce","error_description":"Authorization server requires nonce in DPoP proof"}`
	for _, tc := range []struct {
		name      string
		status    int
		nonces    []string // DPoP-Nonce values
		challenge []string // WWW-Authenticate values
		body      string
		wantNonce string
		wantRetry bool
	}{
		{name: "AS asks for a nonce", status: 400, nonces: []string{"eyJ7S_zG.eyJH0-Z.HX4w-7v"}, body: useNonce, wantNonce: "eyJ7S_zG.eyJH0-Z.HX4w-7v", wantRetry: true},
		{name: "AS other error", status: 400, nonces: []string{"n-1"}, body: `{"error":"invalid_grant"}`, wantNonce: "n-1"},
		{name: "AS asks without a nonce", status: 400, body: useNonce},
		{name: "AS body not JSON", status: 400, nonces: []string{"n-1"}, body: "use_dpop_nonce", wantNonce: "n-1"},
		{name: "AS body too long to read", status: 400, nonces: []string{"n-1"}, body: `{"error":"use_dpop_nonce","pad":"` + strings.Repeat("x", 20<<10) + `"}`, wantNonce: "n-1"},
		{name: "AS error in a 401", status: 401, nonces: []string{"n-1"}, body: useNonce, wantNonce: "n-1"},
		{name: "RS asks for a nonce", status: 401, nonces: []string{"n-1"}, challenge: []string{`DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"`}, wantNonce: "n-1", wantRetry: true},
		{name: "RS token value", status: 401, nonces: []string{"n-1"}, challenge: []string{`DPoP algs="ES256", error=use_dpop_nonce`}, wantNonce: "n-1", wantRetry: true},
		{name: "RS scheme in other case", status: 401, nonces: []string{"n-1"}, challenge: []string{`dpop error="use_dpop_nonce"`}, wantNonce: "n-1", wantRetry: true},
		{name: "RS after a Bearer challenge", status: 401, nonces: []string{"n-1"}, challenge: []string{`Bearer realm="mcp", error="invalid_token", DPoP algs="ES256 PS256", error="use_dpop_nonce"`}, wantNonce: "n-1", wantRetry: true},
		{name: "RS after a token68 challenge", status: 401, nonces: []string{"n-1"}, challenge: []string{`Basic YWxh/ZGRpbg==, DPoP error="use_dpop_nonce"`}, wantNonce: "n-1", wantRetry: true},
		{name: "RS in a second header", status: 401, nonces: []string{"n-1"}, challenge: []string{`Bearer realm="mcp"`, `DPoP error="use_dpop_nonce"`}, wantNonce: "n-1", wantRetry: true},
		{name: "RS error only in the Bearer challenge", status: 401, nonces: []string{"n-1"}, challenge: []string{`Bearer error="use_dpop_nonce", DPoP algs="ES256"`}, wantNonce: "n-1"},
		{name: "RS error only in the Bearer challenge, no space", status: 401, nonces: []string{"n-1"}, challenge: []string{`Bearer error="use_dpop_nonce",DPoP algs="ES256"`}, wantNonce: "n-1"},
		{name: "RS other error", status: 401, nonces: []string{"n-1"}, challenge: []string{`DPoP error="invalid_token"`}, wantNonce: "n-1"},
		{name: "RS error in a description", status: 401, nonces: []string{"n-1"}, challenge: []string{`DPoP error_description="use_dpop_nonce", error="invalid_token"`}, wantNonce: "n-1"},
		{name: "RS escaped quote", status: 401, nonces: []string{"n-1"}, challenge: []string{`DPoP error="invalid_token", error_description="say \"hi\", error=use_dpop_nonce"`}, wantNonce: "n-1"},
		{name: "RS token68 spelled DPoP", status: 401, nonces: []string{"n-1"}, challenge: []string{`Negotiate DPoP, error="use_dpop_nonce"`}, wantNonce: "n-1"},
		{name: "RS asks without a nonce", status: 401, challenge: []string{`DPoP error="use_dpop_nonce"`}},
		{name: "RS error in a 403", status: 403, nonces: []string{"n-1"}, challenge: []string{`DPoP error="use_dpop_nonce"`}, wantNonce: "n-1"},
		{name: "success with a nonce", status: 200, nonces: []string{"n-2"}, wantNonce: "n-2"},
		{name: "success without", status: 200},
		{name: "two nonces", status: 401, nonces: []string{"n-1", "n-2"}, challenge: []string{`DPoP error="use_dpop_nonce"`}},
		{name: "nonce with a quote", status: 401, nonces: []string{`n"1`}, challenge: []string{`DPoP error="use_dpop_nonce"`}},
		{name: "nonce with a space", status: 401, nonces: []string{"n 1"}, challenge: []string{`DPoP error="use_dpop_nonce"`}},
		{name: "nonce with a backslash", status: 401, nonces: []string{`n\1`}, challenge: []string{`DPoP error="use_dpop_nonce"`}},
		{name: "nonce not ASCII", status: 401, nonces: []string{"nö"}, challenge: []string{`DPoP error="use_dpop_nonce"`}},
		{name: "nonce too long", status: 401, nonces: []string{strings.Repeat("n", 4097)}, challenge: []string{`DPoP error="use_dpop_nonce"`}},
		{name: "nonce as long as allowed", status: 401, nonces: []string{strings.Repeat("n", 4096)}, challenge: []string{`DPoP error="use_dpop_nonce"`}, wantNonce: strings.Repeat("n", 4096), wantRetry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tc.body))}
			resp.Header["Dpop-Nonce"] = tc.nonces
			resp.Header["Www-Authenticate"] = tc.challenge
			nonce, retry := dpop.Challenge(resp)
			if nonce != tc.wantNonce || retry != tc.wantRetry {
				t.Fatalf("Challenge = %.40q, %v; want %.40q, %v", nonce, retry, tc.wantNonce, tc.wantRetry)
			}
			if body, err := io.ReadAll(resp.Body); err != nil || string(body) != tc.body {
				t.Fatalf("the body after Challenge is %.60q, %v; want it whole", body, err)
			}
		})
	}
	if nonce, retry := dpop.Challenge(nil); nonce != "" || retry {
		t.Fatalf("Challenge(nil) = %q, %v", nonce, retry)
	}
}
