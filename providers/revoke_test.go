package providers

import (
	"context"
	"errors"
	"testing"

	"github.com/oauthflow/oauthflow"
)

func TestRevokeUnsupported(t *testing.T) {
	t.Parallel()
	p, err := New("github", testCreds)
	if err != nil {
		t.Fatal(err)
	}
	err = p.RevokeToken(context.Background(), "tok", "")
	if p.CanRevoke() || !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, ErrRevocationUnsupported) {
		t.Fatalf("CanRevoke %v, err %v", p.CanRevoke(), err)
	}
}

func TestRevokeRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		style            AuthStyle
		secret, hint     string
		basic            bool
		formID, formHint string
	}{
		{"basic", AuthStyleHeader, "s3:cr%t", "refresh_token", true, "", "refresh_token"},
		{"params", AuthStyleParams, "s", "", false, "client-1", ""},
		{"public client", AuthStyleHeader, "", "access_token", false, "client-1", "access_token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{status: 200})
			c := testCreds
			c.ClientSecret = tt.secret
			p, err := NewOAuth2(Config{ID: "p", AuthURL: f.srv.URL + "/a", TokenURL: f.srv.URL + "/t", RevocationURL: f.srv.URL + "/revoke", AuthStyle: tt.style}, c, WithHTTPClient(f.srv.Client()))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.RevokeToken(context.Background(), "tok-1", tt.hint); err != nil {
				t.Fatal(err)
			}
			req := f.last(t)
			if req.path != "/revoke" || req.form.Get("token") != "tok-1" || req.form.Get("token_type_hint") != tt.formHint || req.form.Get("client_id") != tt.formID {
				t.Errorf("request %s %v", req.path, req.form)
			}
			if tt.basic != (req.auth != "") || tt.basic && (req.user != "client-1" || req.secret != tt.secret) {
				t.Errorf("auth %q user %q secret %q", req.auth, req.user, req.secret)
			}
		})
	}
}

func TestRevokeFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reply     reply
		code      string
		transient bool
	}{
		{"refused", jsonReply(400, `{"error":"unsupported_token_type"}`), "unsupported_token_type", false},
		{"unavailable", reply{503, "text/html", "<p>down</p>"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := newFake(t, tt.reply).generic(t, nil).RevokeToken(context.Background(), "tok", "")
			var pe *oauthflow.ProviderError
			if !errors.As(err, &pe) || pe.Code != tt.code || pe.StatusCode != tt.reply.status || oauthflow.IsTransient(err) != tt.transient {
				t.Fatalf("err = %#v", err)
			}
		})
	}
	f := newFake(t, reply{status: 200})
	p := f.generic(t, nil)
	f.srv.Close()
	if err := p.RevokeToken(context.Background(), "tok", ""); !oauthflow.IsTransient(err) {
		t.Errorf("no answer: %v, want transient", err)
	}
	if err := p.RevokeToken(context.Background(), "", ""); !errors.Is(err, oauthflow.ErrInvalidArgument) {
		t.Errorf("empty token: %v", err)
	}
}

func TestCatalogRevocation(t *testing.T) {
	t.Parallel()
	f := newFake(t, reply{status: 200})
	p := f.catalog(t, "google", testCreds)
	if err := p.RevokeToken(context.Background(), "rt", "refresh_token"); err != nil || !p.CanRevoke() {
		t.Fatal(err)
	}
	if req := f.last(t); req.form.Get("client_secret") != "secret-1" || req.auth != "" {
		t.Errorf("google revocation authenticates like its token endpoint (form): %v %q", req.form, req.auth)
	}
}
