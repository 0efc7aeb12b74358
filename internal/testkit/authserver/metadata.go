package authserver

import "net/http"

// metadata is the RFC 8414 authorization server metadata.
type metadata struct {
	Issuer                             string   `json:"issuer"`
	AuthorizationEndpoint              string   `json:"authorization_endpoint"`
	TokenEndpoint                      string   `json:"token_endpoint"`
	RevocationEndpoint                 string   `json:"revocation_endpoint"`
	IntrospectionEndpoint              string   `json:"introspection_endpoint"`
	DeviceAuthorizationEndpoint        string   `json:"device_authorization_endpoint,omitempty"`
	ResponseTypesSupported             []string `json:"response_types_supported"`
	GrantTypesSupported                []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported  []string `json:"token_endpoint_auth_methods_supported"`
	TokenEndpointAuthSigningAlgs       []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	CodeChallengeMethodsSupported      []string `json:"code_challenge_methods_supported"`
	IssParameterSupported              bool     `json:"authorization_response_iss_parameter_supported,omitempty"`
	DPoPSigningAlgValuesSupported      []string `json:"dpop_signing_alg_values_supported,omitempty"`
	PushedAuthorizationRequestEndpoint string   `json:"pushed_authorization_request_endpoint,omitempty"`
	RequirePushedAuthorizationRequests bool     `json:"require_pushed_authorization_requests,omitempty"`
}

// handleMetadata answers GET /.well-known/oauth-authorization-server.
func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) {
	iss := s.issuerFor(r)
	var algs []string
	if s.opts.DPoP {
		algs = []string{dpopAlg}
	}
	grants := []string{GrantAuthorizationCode, GrantRefreshToken}
	var deviceEndpoint string
	if !s.opts.NoDeviceGrant {
		grants = append(grants, GrantDeviceCode)
		deviceEndpoint = iss + PathDeviceAuthorization
	}
	var parEndpoint string
	if s.opts.PAR {
		parEndpoint = iss + PathPAR
	}
	writeJSON(w, http.StatusOK, metadata{
		Issuer:                             iss,
		AuthorizationEndpoint:              iss + PathAuthorize,
		TokenEndpoint:                      iss + PathToken,
		RevocationEndpoint:                 iss + PathRevoke,
		IntrospectionEndpoint:              iss + PathIntrospect,
		DeviceAuthorizationEndpoint:        deviceEndpoint,
		ResponseTypesSupported:             []string{"code"},
		GrantTypesSupported:                grants,
		TokenEndpointAuthMethodsSupported:  []string{"client_secret_basic", "client_secret_post", "private_key_jwt", "none"},
		TokenEndpointAuthSigningAlgs:       []string{"ES256", "PS256", "EdDSA", "RS256"},
		CodeChallengeMethodsSupported:      []string{MethodS256, MethodPlain},
		IssParameterSupported:              s.opts.IssParameter,
		DPoPSigningAlgValuesSupported:      algs,
		PushedAuthorizationRequestEndpoint: parEndpoint,
		RequirePushedAuthorizationRequests: s.opts.RequirePAR,
	})
}
