package oauthflowtest_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/oauthflow/oauthflow/providers"
)

const redirect = "http://127.0.0.1:8080" + oauthflow.CallbackPath

// The provider offers sign-in with a code against its server unless the
// server has no device grant, and then neither does.
func TestProviderDeviceGrant(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		idp := newServer(t, oauthflowtest.Options{NoDeviceGrant: off})
		p := idp.Provider("local", redirect)
		if p.SupportsDeviceAuth() == off {
			t.Errorf("NoDeviceGrant %v: SupportsDeviceAuth is %v", off, p.SupportsDeviceAuth())
		}
		a, err := p.DeviceAuth(context.Background(), nil)
		switch {
		case off && err == nil:
			t.Error("NoDeviceGrant: DeviceAuth answered")
		case !off && err != nil:
			t.Errorf("DeviceAuth: %v", err)
		case !off && a.VerificationURI != idp.URL+"/device" || !off && a.Interval != 1:
			t.Errorf("verification URI %q every %d s, want the server's page every second", a.VerificationURI, a.Interval)
		}
		resp, err := http.Post(idp.URL+"/device_authorization", "application/x-www-form-urlencoded", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if off != (resp.StatusCode == http.StatusNotFound) {
			t.Errorf("NoDeviceGrant %v: the device authorization endpoint answered %d", off, resp.StatusCode)
		}
	}
}

// Each server makes its own client secret: another server's credentials do
// not refresh there.
func TestCredentialsBelongToTheirServer(t *testing.T) {
	t.Parallel()
	idp, other := newServer(t, oauthflowtest.Options{}), newServer(t, oauthflowtest.Options{})
	if idp.Credentials(redirect).ClientSecret == other.Credentials(redirect).ClientSecret {
		t.Fatal("two servers share a client secret")
	}
	p, err := providers.NewOAuth2(idp.ProviderConfig("local"), other.Credentials(redirect))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.RefreshToken(context.Background(), "any")
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.Code != "invalid_client" {
		t.Fatalf("refresh with another server's secret: %v; want invalid_client", err)
	}
}

func TestProviderPanicsOnABadRedirect(t *testing.T) {
	t.Parallel()
	idp := newServer(t, oauthflowtest.Options{})
	for _, uri := range []string{"https://app.example/callback", "https://127.0.0.1/callback", "", "callback"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Provider with redirect %q did not panic", uri)
				}
			}()
			idp.Provider("local", uri)
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Provider with an empty ID did not panic")
			}
		}()
		idp.Provider("", redirect)
	}()
}
