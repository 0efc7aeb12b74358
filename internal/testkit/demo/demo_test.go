package demo_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/demo"
)

// The demo provider offers sign-in with a code against its own server, unless
// told not to, and then neither offers it.
func TestMountDeviceGrant(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		mux := http.NewServeMux()
		srv := httptest.NewServer(mux)
		as, p, err := demo.Mount(mux, srv.URL, demo.Options{NoDeviceGrant: off})
		if err != nil {
			t.Fatal(err)
		}
		if p.SupportsDeviceAuth() == off {
			t.Errorf("NoDeviceGrant %v: SupportsDeviceAuth is %v", off, p.SupportsDeviceAuth())
		}
		a, err := p.DeviceAuth(context.Background(), nil)
		switch {
		case off && err == nil:
			t.Error("NoDeviceGrant: DeviceAuth answered")
		case !off && err != nil:
			t.Errorf("DeviceAuth: %v", err)
		case !off && a.VerificationURI != as.URL+"/device":
			t.Errorf("verification URI %q, want the demo server's %q", a.VerificationURI, as.URL+"/device")
		}
		resp, err := http.Post(as.URL+"/device_authorization", "application/x-www-form-urlencoded", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if off != (resp.StatusCode == http.StatusNotFound) {
			t.Errorf("NoDeviceGrant %v: the device authorization endpoint answered %d", off, resp.StatusCode)
		}
		srv.Close()
	}
}
