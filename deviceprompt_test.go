package oauthflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oauthflow/oauthflow"
)

// The prompt of a device sign-in carries the complete verification URI (the
// terminal prints it, the widget draws it as a QR code) only where it is on
// the origin of the verification URI the user reads, over https, or over
// http on a loopback address in development; otherwise it is left out, and
// the user opens the verification URI and types the code.
func TestDevicePromptCompleteURIOnlyOnTheVerificationOrigin(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{})
	m := env.mod(0)
	base := mustGet(t, m.Registry, "demo")
	for _, tc := range []struct {
		name, uri, complete string
		kept                bool
	}{
		{"same origin", "https://x.example/d", "https://x.example/d?user_code=ABCD", true},
		{"host in capitals", "https://x.example/d", "https://X.EXAMPLE/d?user_code=ABCD", true},
		{"default port named", "https://x.example/d", "https://x.example:443/d?user_code=ABCD", true},
		{"loopback http", "http://127.0.0.1:8080/d", "http://127.0.0.1:8080/d?user_code=ABCD", true},
		{"localhost http", "http://localhost:8080/d", "http://localhost:8080/d?user_code=ABCD", true},
		{"another host", "https://x.example/d", "https://evil.example/d?user_code=ABCD", false},
		{"a subdomain", "https://x.example/d", "https://x.example.evil.example/d?user_code=ABCD", false},
		{"userinfo", "https://x.example/d", "https://x.example@evil.example/d?user_code=ABCD", false},
		{"another port", "https://x.example/d", "https://x.example:8443/d?user_code=ABCD", false},
		{"http beside https", "https://x.example/d", "http://x.example/d?user_code=ABCD", false},
		{"http, not loopback", "http://x.example/d", "http://x.example/d?user_code=ABCD", false},
		{"loopback, another port", "http://127.0.0.1:8080/d", "http://127.0.0.1:9090/d?user_code=ABCD", false},
	} {
		reg := oauthflow.NewRegistry()
		require.NoError(t, reg.Register(&answeringDevice{Provider: base, auth: oauthflow.DeviceAuthorization{
			DeviceCode: "dc", UserCode: "ABCD", VerificationURI: tc.uri, VerificationURIComplete: tc.complete}}))
		m.Registry = reg
		_, doc, err := m.StartDeviceSignIn(context.Background(), "alice", "demo")
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.uri, doc.VerificationURI, tc.name)
		want := ""
		if tc.kept {
			want = tc.complete
		}
		assert.Equal(t, want, doc.VerificationURIComplete, tc.name)
	}
}
