package dpop_test

import (
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

func TestProofShape(t *testing.T) {
	t.Parallel()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 999_000_000)
	for _, tc := range []struct {
		name, token, nonce string
		want               map[string]any // ath and nonce, when present
	}{
		{"token request", "", "", map[string]any{}},
		{"with nonce", "", "n-1", map[string]any{"nonce": "n-1"}},
		{"resource request", "tok", "", map[string]any{"ath": hashOf("tok")}},
		{"resource request with nonce", "tok", "n-2", map[string]any{"ath": hashOf("tok"), "nonce": "n-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proof, err := k.Proof("POST", "https://user:pw@AS.example:443/token?x=1#frag", now, tc.token, tc.nonce)
			if err != nil {
				t.Fatal(err)
			}
			header, claims, sig := decodeProof(t, proof)
			if len(header) != 3 || header["typ"] != "dpop+jwt" || header["alg"] != "ES256" {
				t.Fatalf("header %v, want typ dpop+jwt, alg ES256 and jwk only", header)
			}
			jwk, _ := header["jwk"].(map[string]any)
			pub := k.PublicJWK()
			if len(jwk) != 4 || jwk["kty"] != "EC" || jwk["crv"] != "P-256" || jwk["x"] != pub.X || jwk["y"] != pub.Y {
				t.Fatalf("jwk %v, want exactly the public members of %+v", jwk, pub)
			}
			if len(sig) != 64 {
				t.Fatalf("signature is %d bytes, want 64 (r||s)", len(sig))
			}
			jti, err := enc.DecodeString(claims["jti"].(string))
			if err != nil || len(jti) != 16 {
				t.Fatalf("jti %v: %d bytes, %v; want 128 bits of base64url", claims["jti"], len(jti), err)
			}
			if claims["htm"] != "POST" || claims["htu"] != "https://as.example/token" || claims["iat"] != float64(1_700_000_000) {
				t.Fatalf("claims %v, want htm POST, htu https://as.example/token, iat 1700000000", claims)
			}
			if len(claims) != 4+len(tc.want) {
				t.Fatalf("claims %v, want jti htm htu iat and %v", claims, tc.want)
			}
			for name, want := range tc.want {
				if claims[name] != want {
					t.Fatalf("%s = %v, want %v", name, claims[name], want)
				}
			}
		})
	}
}

func TestProofJTIUnique(t *testing.T) {
	t.Parallel()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[any]bool{}
	for range 100 {
		proof, err := k.Proof("GET", "https://rs.example/", time.Unix(1, 0), "", "")
		if err != nil {
			t.Fatal(err)
		}
		_, claims, _ := decodeProof(t, proof)
		if seen[claims["jti"]] {
			t.Fatalf("jti %v repeated", claims["jti"])
		}
		seen[claims["jti"]] = true
	}
}

func TestProofHTU(t *testing.T) {
	t.Parallel()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]string{
		"https://as.example/token":             "https://as.example/token",
		"https://as.example/token?code=x#f":    "https://as.example/token",
		"HTTPS://AS.Example:443/Token":         "https://as.example/Token",
		"http://as.example:80":                 "http://as.example/",
		"https://as.example:8443/a%2Fb?c":      "https://as.example:8443/a%2Fb",
		"http://127.0.0.1:9000/mcp":            "http://127.0.0.1:9000/mcp",
		"http://[::1]:9000/mcp":                "http://[::1]:9000/mcp",
		"http://[::1]/mcp":                     "http://[::1]/mcp",
		"https://alice:secret@as.example/path": "https://as.example/path",
	} {
		proof, err := k.Proof("GET", target, time.Unix(1, 0), "", "")
		if err != nil {
			t.Errorf("%s: %v", target, err)
			continue
		}
		if _, claims, _ := decodeProof(t, proof); claims["htu"] != want {
			t.Errorf("htu of %s = %v, want %s", target, claims["htu"], want)
		}
	}
}

func TestProofRefusesBadInput(t *testing.T) {
	t.Parallel()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		key            *dpop.Key
		method, target string
	}{
		{"nil key", nil, "GET", "https://rs.example/"},
		{"zero key", &dpop.Key{}, "GET", "https://rs.example/"},
		{"no method", k, "", "https://rs.example/"},
		{"relative target", k, "GET", "/token"},
		{"no host", k, "GET", "https:///token"},
		{"not http", k, "GET", "ftp://rs.example/"},
		{"unparsable", k, "GET", "https://rs.example/%zz"},
	} {
		if proof, err := tc.key.Proof(tc.method, tc.target, time.Unix(1, 0), "", ""); err == nil {
			t.Errorf("%s: Proof = %q, want an error", tc.name, proof)
		}
	}
}
