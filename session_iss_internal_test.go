package oauthflow

import (
	"reflect"
	"testing"
)

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
