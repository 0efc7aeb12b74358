package mcpauth_test

import (
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// OAuthHandler is what the official Go SDK's transports take.
var _ auth.OAuthHandler = (*mcpauth.OAuthHandler)(nil)
