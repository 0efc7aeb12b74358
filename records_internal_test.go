package oauthflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func FuzzDecodeStoredTokens(f *testing.F) {
	for _, seed := range []string{
		`{"accessToken":"a","refreshToken":"r","expiresAt":1700000000000,"scope":"read write"}`,
		`{"accessToken":"a","expiresAt":0,"scope":""}`,
		`{"accessToken":"a","refreshToken":"r","expiresAt":1,"scope":"s","tokenType":"DPoP","dpopKey":"AQID"}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","dpopKey":"AQID"}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","dpopKey":"AQID","tokenType":"DPoP"}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","tokenType":null}`,
		`{"accessToken":"a\u00e9","expiresAt":-0,"scope":"s"}`,
		`{"accessToken":"a","expiresAt":01,"scope":"s"}`,
		`{"scope":"s","expiresAt":5,"accessToken":"a"}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","x":1}`,
		`{"accessToken":"a","expiresAt":99999999999999999999,"scope":"s"}`,
		`{"accessToken":"a","expiresAt":1.5,"scope":"s"}`,
		`{"accessToken":"<&>","expiresAt":1,"scope":"s"} `,
		"{\"accessToken\":\"\x00\",\"expiresAt\":1,\"scope\":\"s\"}",
		`{"accessToken":"a","expiresAt":1,"scope":"s","authorizationDetails":[{"type":"t","note":"a & b"}]}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","authorizationDetails":[ {"type" : "t"} ]}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","authorizationDetails":[{"kind":"t"}]}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","authorizationDetails":"[]"}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","authorizationDetails":null}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","authorizationDetails":[]}`,
		`null`, ``, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeStoredTokens(b)
		if err != nil {
			if !errors.Is(err, errCorruptRecord) {
				t.Fatalf("error %v does not wrap errCorruptRecord", err)
			}
			return
		}
		// Whatever the fast path accepts, encoding/json reads the same way.
		if fast, ok := fastDecodeStoredTokens(b); ok {
			var ref StoredTokens
			if err := json.Unmarshal(b, &ref); err != nil || !reflect.DeepEqual(ref, fast) {
				t.Fatalf("fast path read %q as %+v; encoding/json: %+v, %v", b, fast, ref, err)
			}
		}
		// A decoded record survives a round trip through our encoder, on the fast path.
		enc := encodeStoredTokens(got)
		again, err := decodeStoredTokens(enc)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip of %+v: %+v, %v", got, again, err)
		}
		v, err := parseTokenView(enc)
		if err != nil || !reflect.DeepEqual(v.tokens(), got) {
			t.Fatalf("token view of %s: %+v, %v", enc, v.tokens(), err)
		}
	})
}

// encodeStoredTokens writes what encoding/json writes for every record:
// the fast path's for plain ones, encoding/json's own for the rest.
func FuzzEncodeStoredTokens(f *testing.F) {
	f.Add("gho_16C7e42F292c6912E7710c838347Ae178B4a", "ghr_1B4a2e77838347a7E420ce178F2E7c6912E1", int64(1700000000000), "repo,gist", "", "", "", "")
	f.Add("a", "", int64(0), "", "DPoP", "AQID", "octocat", "")
	f.Add("a", "r", int64(1), "s", "", "", "", "9130349287") // QuickBooks' realmId kept
	f.Add("a<b>&c", "r\"q\\", int64(-1), "s\u00e9", "\x7f", "\x00", "ää", "k")
	for _, odd := range []string{"<", ">", "&", `"`, `\`, "\x1f", "\x7f", "\u2028", "\xff"} { // each alone, where encoding/json escapes it
		f.Add("a"+odd, "", int64(1), "s", "", "", "", "")
	}
	f.Fuzz(func(t *testing.T, access, refresh string, expires int64, scope, tokenType, key, account, metadata string) {
		tok := StoredTokens{AccessToken: access, RefreshToken: refresh, ExpiresAt: expires, Scope: scope,
			TokenType: tokenType, DPoPKey: key, Account: account}
		if metadata != "" {
			tok.Metadata = map[string]string{"realmId": metadata}
		}
		want, err := json.Marshal(tok)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeStoredTokens(tok); !bytes.Equal(got, want) {
			t.Fatalf("encoded %+v as\n%s\nencoding/json writes\n%s", tok, got, want)
		}
	})
}

func FuzzDecodeSession(f *testing.F) {
	f.Add([]byte(`{"workflowId":"w","userId":"u","provider":"p","codeVerifier":"v","scopes":["a"]}`))
	f.Add([]byte(`{"userId":"u","provider":"p","extra":true}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSession(b)
		if err != nil {
			if !errors.Is(err, errCorruptRecord) {
				t.Fatalf("error %v does not wrap errCorruptRecord", err)
			}
			return
		}
		if s.UserID == "" || s.Provider == "" {
			t.Fatalf("accepted a session without user or provider: %+v", s)
		}
	})
}

func TestFastPathCoversOwnEncoding(t *testing.T) {
	for _, tok := range []StoredTokens{
		{AccessToken: "gho_abc.DEF-123", RefreshToken: "ghr_x", ExpiresAt: 1_800_000_000_000, Scope: "repo read:user"},
		{AccessToken: "ya29.a0", ExpiresAt: 0, Scope: ""},
	} {
		if _, ok := fastParseStoredTokens(encodeStoredTokens(tok)); !ok {
			t.Errorf("the hot path falls back to encoding/json for %s", encodeStoredTokens(tok))
		}
	}
}
