// Package providers makes oauthflow providers: a generic one over
// golang.org/x/oauth2 ([NewOAuth2]), one from authorization server metadata
// ([Discover]), and one per entry of an embedded catalog of well-known
// providers ([New], [FromEnv]).
//
//	gh, err := providers.FromEnv("github") // GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET, GITHUB_OAUTH_REDIRECT_URI
//	ms, err := providers.New("microsoft", providers.Credentials{
//		ClientID: id, ClientSecret: secret, RedirectURL: cb,
//		Params: map[string]string{"tenant": "contoso.onmicrosoft.com"},
//	})
//	reg.Register(gh)
//
// # What the root package can rely on
//
//   - PKCE: SupportsPKCE is false only for providers known not to accept it;
//     RequiresPKCE is true for providers that refuse a flow without it (X).
//     BuildAuthURL never adds PKCE itself: pass oauth2.S256ChallengeOption.
//   - Issuer is empty unless the server sends the RFC 9207 iss parameter
//     (learned by Discover, or set in Config.Issuer).
//   - RevokeToken returns ErrRevocationUnsupported, which matches
//     errors.Is(err, errors.ErrUnsupported), when there is no RFC 7009
//     endpoint; CanRevoke tells in advance.
//   - ExchangeCode and RefreshToken fail with *oauthflow.ProviderError:
//     StatusCode 0 with Err set when no answer came; the provider's status and
//     RFC 6749 error fields otherwise, with the *oauth2.RetrieveError as Err
//     where x/oauth2 made one. An HTTP 200 answer carrying "error" (GitHub) or
//     Slack's ok:false is an error; so is an answer without access_token or
//     with a token_type other than bearer (any case), absent, or one the
//     provider documents (Slack's bot and user).
//   - DeadGrantCodes names the provider's own error codes for a refresh token
//     that will never work again, besides invalid_grant (GitHub
//     bad_refresh_token, HubSpot BAD_REFRESH_TOKEN, Slack
//     invalid_refresh_token); the ProviderError's Code carries them, HubSpot's
//     read from its "status" field (Config.ErrorCodeField). A code that can
//     also mean a misconfigured client (invalid_client, ...) is refused.
//   - TokenSet.ExpiresIn is 0 when the answer has no expires_in (a number or a
//     numeric string). TokenSet.Scope is the granted scope from the answer,
//     normalised to a space-separated list (comma lists and Twitch's array
//     included), or "" when the answer has none: the caller keeps the scopes
//     it asked for. TokenSet.RefreshToken is "" when a refresh answer carries
//     none: the caller keeps the old one.
//   - Slack: with the default token_type=bot the bot token (top level) is the
//     access token; with Params["token_type"]="user" scopes are sent as
//     user_scope and the user token under authed_user is returned. An answer
//     with only a user token yields the user token either way.
//   - DeviceAuth and DeviceToken (optional methods of oauthflow.Provider) run
//     the RFC 8628 device authorization grant where Config.DeviceAuthURL is
//     set (SupportsDeviceAuth; Discover reads device_authorization_endpoint);
//     without it both return ErrDeviceAuthUnsupported. DeviceToken's refusals
//     are *oauthflow.ProviderError with the provider's code as sent
//     (authorization_pending, slow_down, access_denied, expired_token;
//     Microsoft's authorization_declined), an HTTP 200 answer carrying
//     "error" included; its success is the TokenSet ExchangeCode would make.
//   - A public client (empty ClientSecret) sends client_id in the form body.
//   - Every request uses the provider's HTTP client (WithHTTPClient, else its
//     own client with a 15 s timeout), passed to x/oauth2 through the
//     oauth2.HTTPClient context key. There is no package-level state beyond
//     the read-only embedded catalog.
//
// # Catalog
//
// Each entry's endpoints, default scopes, separator, client authentication,
// PKCE support and refresh behaviour were checked against the provider's
// public documentation; the catalog names the page. PKCE is marked
// supported only where the provider documents it. Parameters fill URL
// templates (FromEnv reads them as <ID>_<PARAM>, e.g. MICROSOFT_TENANT).
//
// The entries, with their endpoints, parameters and quirks, are listed in
// docs/providers.md, which a test keeps equal to the catalog; Known lists
// their IDs and Lookup returns one as checked.
package providers
