package oauthflow_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// A provider's answer that asks to be asked again later is transient, on
// every path that retries (a refresh, a device poll, a workload's grant):
// 408, 429, 5xx and temporarily_unavailable under any status; a refusal is not.
func TestIsTransient(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pe        oauthflow.ProviderError
		transient bool
	}{
		{oauthflow.ProviderError{StatusCode: http.StatusRequestTimeout}, true},
		{oauthflow.ProviderError{StatusCode: http.StatusTooManyRequests, Code: "slow_down"}, true},
		{oauthflow.ProviderError{StatusCode: http.StatusServiceUnavailable}, true},
		{oauthflow.ProviderError{StatusCode: http.StatusBadRequest, Code: "temporarily_unavailable"}, true},
		{oauthflow.ProviderError{StatusCode: http.StatusBadRequest, Code: "invalid_scope"}, false},
		{oauthflow.ProviderError{StatusCode: http.StatusUnauthorized, Code: "invalid_client"}, false},
		{oauthflow.ProviderError{StatusCode: http.StatusBadRequest, Code: "invalid_grant"}, false},
	} {
		pe := tt.pe
		pe.ProviderID = "acme"
		if got := oauthflow.IsTransient(&pe); got != tt.transient {
			t.Errorf("IsTransient(HTTP %d %q) = %v, want %v", pe.StatusCode, pe.Code, got, tt.transient)
		}
	}
	if oauthflow.IsTransient(errors.New("not a provider's")) {
		t.Error("an error of no kind the library knows is transient")
	}
}
