package oauthflow

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/keyspace"
)

// Whatever the session fast path accepts, the strict decoder reads the same
// way; and decodeSession (fast path first) accepts and refuses exactly what
// the strict decoder alone does.
func FuzzSessionFastPath(f *testing.F) {
	for _, seed := range []string{
		`{"workflowId":"w","userId":"u","provider":"p","codeVerifier":"v","scopes":["a","b"],"redirectUrl":"https://x/cb","issuer":"https://i","createdAt":1800000000000}`,
		`{"workflowId":"","userId":"u","provider":"p"}`,
		`{"workflowId":"w","userId":"u","provider":"p","binding":"b","dpopKey":"AQID"}`,
		`{"workflowId":"w","userId":"u","provider":"p","dpopKey":"AQID","binding":"b"}`,
		`{"workflowId":"","userId":"","provider":"p"}`,
		`{"workflowId":"w","userId":"u","provider":"p","scopes":[]}`,
		`{"workflowId":"w","userId":"u","provider":"p","createdAt":01}`,
		`{"workflowId":"w","userId":"u","provider":"p","createdAt":-0}`,
		`{"workflowId":"w","userId":"u","provider":"p","x":1}`,
		`{"workflowId":"w","userId":"u\u00e9","provider":"p"}`,
		`{"workflowId":"w","userId":"u","provider":"p"} `,
		`{"workflowId":"w","userId":"u","provider":"p"}{}`,
		`{"WorkflowID":"w","userId":"u","provider":"p"}`,
		`null`, ``, `{`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeSession(b)
		ref, refErr := strictSession(b)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%q: decodeSession err %v, strict decoder err %v", b, err, refErr)
		}
		if err != nil {
			if !errors.Is(err, errCorruptRecord) {
				t.Fatalf("error %v does not wrap errCorruptRecord", err)
			}
			return
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("%q: decodeSession read %+v, the strict decoder %+v", b, got, ref)
		}
		if fast, ok := fastDecodeSession(b); ok && !reflect.DeepEqual(fast, ref) {
			t.Fatalf("%q: fast path read %+v, the strict decoder %+v", b, fast, ref)
		}
	})
}

// strictSession is decodeSession without the fast path.
func strictSession(b []byte) (*Session, error) {
	var s Session
	if err := strictUnmarshal(b, &s); err != nil {
		return nil, err
	}
	if s.UserID == "" || s.Provider == "" {
		return nil, errCorruptRecord
	}
	return &s, nil
}

// The sessions this package writes decode on the fast path.
func TestSessionFastPathCoversOwnEncoding(t *testing.T) {
	t.Parallel()
	for _, s := range []Session{
		{WorkflowID: "run-1", UserID: "alice", Provider: "github", CodeVerifier: "abc-DEF_123.~", Scopes: []string{"repo", "read:user"},
			RedirectURL: "https://app.example/api/v1/oauth/callback", Issuer: "https://github.com/login/oauth", CreatedAt: 1_800_000_000_000},
		{UserID: "bob", Provider: "google"},
	} {
		b, err := encodeSession(s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := fastDecodeSession(b)
		if !ok || !reflect.DeepEqual(*got, s) {
			t.Errorf("%s: fast path %+v, %v", b, got, ok)
		}
	}
}

func BenchmarkDecodeSession(b *testing.B) {
	enc, _ := json.Marshal(Session{WorkflowID: "run-1", UserID: "alice", Provider: "github", CodeVerifier: "v", CreatedAt: 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSession(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// A sign-in's IssOptional survives the store on the fast path, and a stored
// sign-in from before it existed reads as "iss required", as it was.
func TestSessionKeepsIssOptional(t *testing.T) {
	t.Parallel()
	s := Session{UserID: "alice", Provider: "mcp-x", Issuer: "https://as.example", IssOptional: true, CreatedAt: 1}
	b, err := encodeSession(s)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := fastDecodeSession(b)
	if !ok || !reflect.DeepEqual(*got, s) {
		t.Fatalf("%s: fast path %+v, %v", b, got, ok)
	}
	old, err := decodeSession([]byte(`{"workflowId":"","userId":"alice","provider":"p","issuer":"https://as.example"}`))
	if err != nil || old.IssOptional || checkIss(old, "") == nil {
		t.Fatalf("an older sign-in: %+v, %v; want iss required", old, err)
	}
}

func TestIssuedForms(t *testing.T) {
	t.Parallel()
	for range 100 {
		if s := newState(); !keyspace.IssuedState(s) {
			t.Fatalf("newState %q is not of the issued form", s)
		}
		if id := randomHex(16); !keyspace.IssuedRunID(id) {
			t.Fatalf("run ID %q is not of the issued form", id)
		}
	}
	for _, s := range []string{"", "github", strings.Repeat("A", 42), strings.Repeat("A", 44), strings.Repeat("A", 42) + ":",
		strings.Repeat("A", 42) + "=", ":" + strings.Repeat("A", 42), "~" + strings.Repeat("A", 42)} {
		if keyspace.IssuedState(s) {
			t.Errorf("keyspace.IssuedState(%q) = true", s)
		}
	}
	for _, id := range []string{"", "github", strings.Repeat("a", 31), strings.Repeat("A", 32), strings.Repeat("a", 31) + ":"} {
		if keyspace.IssuedRunID(id) {
			t.Errorf("keyspace.IssuedRunID(%q) = true", id)
		}
	}
}

// Only a state of the issued form (32 random bytes, base64url, no padding)
// is taken for one: anything else is refused before the store is touched.
func TestIssuedStateForm(t *testing.T) {
	t.Parallel()
	st := newState()
	if !keyspace.IssuedState(st) {
		t.Fatalf("keyspace.IssuedState(%q) = false for an issued state", st)
	}
	for _, bad := range []string{"", st[:42], st + "A", "." + st[1:], "+" + st[1:], "/" + st[1:], st[:42] + "=",
		":" + st[1:], "é" + st[2:], st[:20] + " " + st[21:]} {
		if keyspace.IssuedState(bad) {
			t.Errorf("keyspace.IssuedState(%q) = true", bad)
		}
	}
}
