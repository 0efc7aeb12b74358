package mcpauth_test

// lastClientID is the client ID of the fake's last token request.
func (f *fakeMCPAuth) lastClientID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastClient
}

// revokeClient has the fake's token endpoint answer invalid_client to id.
func (f *fakeMCPAuth) revokeClient(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[id] = true
}
