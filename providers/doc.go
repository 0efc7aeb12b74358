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
//   - DeviceAuth and DeviceToken (oauthflow.DeviceAuthorizer) run the RFC
//     8628 device authorization grant where Config.DeviceAuthURL is set
//     (SupportsDeviceAuth; Discover reads device_authorization_endpoint);
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
// Entries, from the catalog:
//
//   - amazon: Login with Amazon.
//     Authorize at https://www.amazon.com/ap/oa;
//     token at https://api.amazon.com/auth/o2/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "profile", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Quirks: Access tokens last one hour; the refresh token does not change on refresh.
//     Documented at https://developer.amazon.com/docs/login-with-amazon/authorization-code-grant.html
//   - asana: Asana.
//     Authorize at https://app.asana.com/-/oauth_authorize;
//     token at https://app.asana.com/-/oauth_token;
//     revoke (RFC 7009) at https://app.asana.com/-/oauth_revoke.
//     Default scopes "default", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Quirks: Access tokens last one hour; refresh answers carry no new refresh token. The token response nests the user under "data".
//     Documented at https://developers.asana.com/docs/oauth
//   - atlassian: Atlassian.
//     Authorize at https://auth.atlassian.com/authorize;
//     token at https://auth.atlassian.com/oauth/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "read:me offline_access", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Sign-ins also send audience=api.atlassian.com, prompt=consent.
//     Quirks: OAuth 2.0 (3LO): audience=api.atlassian.com and prompt=consent are required; offline_access yields a rotating refresh token.
//     Documented at https://developer.atlassian.com/cloud/jira/platform/oauth-2-3lo-apps/
//   - auth0: Auth0.
//     Authorize at https://{domain}/authorize;
//     token at https://{domain}/oauth/token;
//     revoke (RFC 7009) at https://{domain}/oauth/revoke.
//     Device authorization (RFC 8628) at https://{domain}/oauth/device/code,
//     documented at https://auth0.com/docs/api/authentication/device-authorization-flow/authorize-device: a Native application with the Device Code grant type; TokenParams["audience"] names the API. expired_token is answered once, then invalid_grant (https://auth0.com/docs/quickstart/native/device/interactive).
//     Default scopes "openid profile email offline_access", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Parameter domain (env AUTH0_DOMAIN): the tenant's domain, e.g. my-tenant.us.auth0.com or a custom domain.
//     Quirks: offline_access yields a refresh token; rotation is a tenant setting. Discover(issuer) also fits.
//     Documented at https://auth0.com/docs/api/authentication
//   - bitbucket: Bitbucket.
//     Authorize at https://bitbucket.org/site/oauth2/authorize;
//     token at https://bitbucket.org/site/oauth2/access_token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "account", joined with " ".
//     Client authentication: HTTP Basic. PKCE: unsupported.
//     Quirks: Consumers authenticate with HTTP Basic; access tokens last two hours and every answer carries a refresh token.
//     Documented at https://developer.atlassian.com/cloud/bitbucket/oauth-2/
//   - box: Box.
//     Authorize at https://account.box.com/api/oauth2/authorize;
//     token at https://api.box.com/oauth2/token;
//     revoke (RFC 7009) at https://api.box.com/oauth2/revoke.
//     Default scopes "", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Quirks: Scopes are set on the app, so none are sent by default. Refresh tokens are single use: each refresh returns a new one.
//     Documented at https://developer.box.com/guides/authentication/oauth2/
//   - digitalocean: DigitalOcean.
//     Authorize at https://cloud.digitalocean.com/v1/oauth/authorize;
//     token at https://cloud.digitalocean.com/v1/oauth/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "read", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Quirks: Access tokens last 30 days; refresh returns a new refresh token. Revocation authenticates with the token itself, not RFC 7009, so it is not configured.
//     Documented at https://docs.digitalocean.com/reference/api/oauth/
//   - discord: Discord.
//     Authorize at https://discord.com/oauth2/authorize;
//     token at https://discord.com/api/oauth2/token;
//     revoke (RFC 7009) at https://discord.com/api/oauth2/token/revoke.
//     Default scopes "identify email", joined with " ".
//     Client authentication: HTTP Basic. PKCE: unsupported.
//     Quirks: Access tokens last about a week; refresh returns a new refresh token.
//     Documented at https://discord.com/developers/docs/topics/oauth2
//   - dropbox: Dropbox.
//     Authorize at https://www.dropbox.com/oauth2/authorize;
//     token at https://api.dropboxapi.com/oauth2/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Sign-ins also send token_access_type=offline.
//     Quirks: token_access_type=offline is needed for a refresh token; short-lived access tokens (4 h); refresh answers carry no new refresh token. Scopes default to the app's permissions. Revocation is a bearer-authenticated RPC, not RFC 7009.
//     Documented at https://developers.dropbox.com/oauth-guide
//   - figma: Figma.
//     Authorize at https://www.figma.com/oauth;
//     token at https://api.figma.com/v1/oauth/token;
//     refresh at https://api.figma.com/v1/oauth/refresh;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "current_user:read", joined with " ".
//     Client authentication: HTTP Basic. PKCE: unsupported.
//     Quirks: Refresh has its own endpoint and answers only an access token and its lifetime, so the old refresh token stays.
//     Documented at https://developers.figma.com/docs/rest-api/authentication/
//   - github: GitHub.
//     Authorize at https://github.com/login/oauth/authorize;
//     token at https://github.com/login/oauth/access_token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Device authorization (RFC 8628) at https://github.com/login/device/code,
//     documented at https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#device-flow: device flow must be enabled in the app's settings. The device code answer is form-encoded unless asked for JSON, and polls are refused with HTTP 200 and an error field (authorization_pending, slow_down, expired_token, access_denied).
//     Default scopes "read:user user:email", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Dead grant codes besides invalid_grant: bad_refresh_token.
//     Quirks: Answers form-encoded unless asked for JSON, and reports a bad code with HTTP 200 and an error field. OAuth app tokens do not expire and have no refresh token; GitHub App user tokens expire after 8 h with a rotating refresh token. Revocation is a REST call, not RFC 7009.
//     Documented at https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps
//   - gitlab: GitLab.
//     Authorize at {base_url}/oauth/authorize;
//     token at {base_url}/oauth/token;
//     revoke (RFC 7009) at {base_url}/oauth/revoke.
//     Device authorization (RFC 8628) at {base_url}/oauth/authorize_device,
//     documented at https://docs.gitlab.com/api/oauth2/#device-authorization-grant-flow: GitLab 17.1 and later, self-managed instances at their base_url.
//     Default scopes "read_user", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Parameter base_url (env GITLAB_BASE_URL) (default https://gitlab.com): the instance URL of a self-managed GitLab.
//     Quirks: Access tokens last two hours; every refresh returns a new refresh token.
//     Documented at https://docs.gitlab.com/api/oauth2/
//   - google: Google.
//     Authorize at https://accounts.google.com/o/oauth2/v2/auth;
//     token at https://oauth2.googleapis.com/token;
//     revoke (RFC 7009) at https://oauth2.googleapis.com/revoke.
//     Device authorization (RFC 8628) at https://oauth2.googleapis.com/device/code,
//     documented at https://developers.google.com/identity/protocols/oauth2/limited-input-device: the client must be of the "TVs and Limited Input devices" type and only a limited set of scopes is allowed. The answer names verification_url, not verification_uri; polls need the client secret.
//     Default scopes "openid email profile", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Sign-ins also send access_type=offline, include_granted_scopes=true, prompt=consent.
//     Quirks: A refresh token comes only with access_type=offline, and again on later sign-ins only with prompt=consent. Refresh answers carry no new refresh token.
//     Documented at https://developers.google.com/identity/protocols/oauth2/web-server
//   - heroku: Heroku.
//     Authorize at https://id.heroku.com/oauth/authorize;
//     token at https://id.heroku.com/oauth/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "identity", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Quirks: Access tokens last eight hours; the refresh token does not change.
//     Documented at https://devcenter.heroku.com/articles/oauth
//   - hubspot: HubSpot.
//     Authorize at https://app.hubspot.com/oauth/authorize;
//     token at https://api.hubapi.com/oauth/v1/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "oauth", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Dead grant codes besides invalid_grant: BAD_REFRESH_TOKEN.
//     Quirks: Access tokens last 30 minutes; the refresh token does not change. Errors use status/message rather than RFC 6749 error fields.
//     Documented at https://developers.hubspot.com/docs/api/oauth-quickstart-guide
//   - intuit: Intuit QuickBooks.
//     Authorize at https://appcenter.intuit.com/connect/oauth2;
//     token at https://oauth.platform.intuit.com/oauth2/v1/tokens/bearer;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "com.intuit.quickbooks.accounting", joined with " ".
//     Client authentication: HTTP Basic. PKCE: unsupported.
//     Quirks: Access tokens last one hour; refresh tokens rotate (use the newest). The company's realmId arrives on the redirect. Revocation takes a JSON body, not RFC 7009 form data, so it is not configured.
//     Documented at https://developer.intuit.com/app/developer/qbo/docs/develop/authentication-and-authorization/oauth-2.0
//   - keycloak: Keycloak.
//     Authorize at {base_url}/realms/{realm}/protocol/openid-connect/auth;
//     token at {base_url}/realms/{realm}/protocol/openid-connect/token;
//     revoke (RFC 7009) at {base_url}/realms/{realm}/protocol/openid-connect/revoke.
//     Default scopes "openid profile email", joined with " ".
//     Client authentication: HTTP Basic. PKCE: supported.
//     Parameter base_url (env KEYCLOAK_BASE_URL): the server URL, e.g. https://sso.example.com (add /auth for Keycloak 16 and older).
//     Parameter realm (env KEYCLOAK_REALM): the realm name.
//     Quirks: Refresh tokens rotate by default. Keycloak supports RFC 9207; build it with Discover to enable the iss check.
//     Documented at https://www.keycloak.org/securing-apps/oidc-layers
//   - linear: Linear.
//     Authorize at https://linear.app/oauth/authorize;
//     token at https://api.linear.app/oauth/token;
//     revoke (RFC 7009) at https://api.linear.app/oauth/revoke.
//     Default scopes "read", joined with ",".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Quirks: Scopes are comma-separated. Access tokens last 24 h with rotating refresh tokens (mandatory for all apps since April 2026).
//     Documented at https://linear.app/developers/oauth-2-0-authentication
//   - linkedin: LinkedIn.
//     Authorize at https://www.linkedin.com/oauth/v2/authorization;
//     token at https://www.linkedin.com/oauth/v2/accessToken;
//     revoke (RFC 7009) at https://www.linkedin.com/oauth/v2/revoke.
//     Default scopes "openid profile email", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Quirks: Access tokens last 60 days; refresh tokens are issued to approved partners only. PKCE is for native clients only.
//     Documented at https://learn.microsoft.com/en-us/linkedin/shared/authentication/authorization-code-flow
//   - microsoft: Microsoft Entra ID.
//     Authorize at https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize;
//     token at https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Device authorization (RFC 8628) at https://login.microsoftonline.com/{tenant}/oauth2/v2.0/devicecode,
//     documented at https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-device-code: the user has 15 minutes by default. A refusal polls as authorization_declined rather than access_denied, an unknown device code as bad_verification_code.
//     Default scopes "openid profile email offline_access User.Read", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Parameter tenant (env MICROSOFT_TENANT) (default common): tenant ID or domain, or common, organizations, consumers.
//     Quirks: offline_access yields a refresh token, which rotates on every refresh. No RFC 7009 revocation endpoint.
//     Documented at https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-auth-code-flow
//   - notion: Notion.
//     Authorize at https://api.notion.com/v1/oauth/authorize;
//     token at https://api.notion.com/v1/oauth/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "", joined with " ".
//     Client authentication: HTTP Basic, JSON token requests. PKCE: unsupported.
//     Sign-ins also send owner=user.
//     Quirks: Token requests are JSON with HTTP Basic client authentication; owner=user is required on authorize. No scopes: the user picks pages.
//     Documented at https://developers.notion.com/reference/create-a-token
//   - okta: Okta.
//     Authorize at https://{domain}/oauth2/{authorization_server}/v1/authorize;
//     token at https://{domain}/oauth2/{authorization_server}/v1/token;
//     revoke (RFC 7009) at https://{domain}/oauth2/{authorization_server}/v1/revoke.
//     Device authorization (RFC 8628) at https://{domain}/oauth2/{authorization_server}/v1/device/authorize,
//     documented at https://developer.okta.com/docs/guides/device-authorization-grant/main/: only a native app integration with the Device Authorization grant type may use it, and a custom authorization server needs a policy rule that allows it.
//     Default scopes "openid profile email offline_access", joined with " ".
//     Client authentication: HTTP Basic. PKCE: supported.
//     Parameter authorization_server (env OKTA_AUTHORIZATION_SERVER) (default default): the custom authorization server ID.
//     Parameter domain (env OKTA_DOMAIN): the Okta domain, e.g. dev-123456.okta.com.
//     Quirks: offline_access yields a refresh token; rotation is a policy setting.
//     Documented at https://developer.okta.com/docs/guides/implement-grant-type/authcode/main/
//   - patreon: Patreon.
//     Authorize at https://www.patreon.com/oauth2/authorize;
//     token at https://www.patreon.com/api/oauth2/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "identity identity[email]", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Quirks: Access tokens last about a month; refresh returns a new refresh token.
//     Documented at https://docs.patreon.com/#oauth
//   - pinterest: Pinterest.
//     Authorize at https://www.pinterest.com/oauth/;
//     token at https://api.pinterest.com/v5/oauth/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "user_accounts:read", joined with ",".
//     Client authentication: HTTP Basic. PKCE: unsupported.
//     Quirks: Scopes are comma-separated; the client authenticates with HTTP Basic. Access tokens last 30 days.
//     Documented at https://developers.pinterest.com/docs/getting-started/authentication-and-scopes/
//   - reddit: Reddit.
//     Authorize at https://www.reddit.com/api/v1/authorize;
//     token at https://www.reddit.com/api/v1/access_token;
//     revoke (RFC 7009) at https://www.reddit.com/api/v1/revoke_token.
//     Default scopes "identity", joined with " ".
//     Client authentication: HTTP Basic. PKCE: unsupported.
//     Sign-ins also send duration=permanent.
//     Quirks: The token endpoint accepts HTTP Basic only; duration=permanent is needed for a refresh token. Access tokens last one hour.
//     Documented at https://github.com/reddit-archive/reddit/wiki/OAuth2
//   - salesforce: Salesforce.
//     Authorize at https://{domain}/services/oauth2/authorize;
//     token at https://{domain}/services/oauth2/token;
//     revoke (RFC 7009) at https://{domain}/services/oauth2/revoke.
//     Default scopes "api refresh_token", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: supported.
//     Parameter domain (env SALESFORCE_DOMAIN) (default login.salesforce.com): login host: login.salesforce.com, test.salesforce.com or a My Domain host.
//     Quirks: Answers carry no expires_in (session policy decides) and add instance_url; the refresh token does not change.
//     Documented at https://help.salesforce.com/s/articleView?id=sf.remoteaccess_oauth_web_server_flow.htm
//   - shopify: Shopify.
//     Authorize at https://{shop}.myshopify.com/admin/oauth/authorize;
//     token at https://{shop}.myshopify.com/admin/oauth/access_token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "read_products", joined with ",".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Parameter shop (env SHOPIFY_SHOP): the shop's subdomain, e.g. my-shop (my-shop.myshopify.com is accepted).
//     Quirks: Scopes are comma-separated, also in the answer, which has no token_type. Offline tokens do not expire and have no refresh token.
//     Documented at https://shopify.dev/docs/apps/build/authentication-authorization/access-tokens/authorization-code-grant
//   - slack: Slack.
//     Authorize at https://slack.com/oauth/v2/authorize;
//     token at https://slack.com/api/oauth.v2.access;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "chat:write", joined with ",".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Parameter token_type (env SLACK_TOKEN_TYPE) (default bot): bot: scopes go in scope and the bot token is returned; user: scopes go in user_scope and the user token under authed_user is returned.
//     Dead grant codes besides invalid_grant: invalid_refresh_token.
//     Quirks: Errors come as HTTP 200 with ok:false and error. Tokens do not expire unless token rotation is on (12 h, rotating refresh token). Revocation (auth.revoke) is not RFC 7009.
//     Documented at https://docs.slack.dev/reference/methods/oauth.v2.access
//   - spotify: Spotify.
//     Authorize at https://accounts.spotify.com/authorize;
//     token at https://accounts.spotify.com/api/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "user-read-email user-read-private", joined with " ".
//     Client authentication: HTTP Basic. PKCE: supported.
//     Quirks: Access tokens last one hour; refresh answers may omit the refresh token (keep the old one).
//     Documented at https://developer.spotify.com/documentation/web-api/tutorials/code-flow
//   - strava: Strava.
//     Authorize at https://www.strava.com/oauth/authorize;
//     token at https://www.strava.com/oauth/token;
//     no RFC 7009 revocation (RevokeToken returns ErrRevocationUnsupported).
//     Default scopes "read", joined with ",".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Sign-ins also send approval_prompt=auto.
//     Quirks: Scopes are comma-separated; the granted scope arrives on the redirect, not in the token answer. Access tokens last six hours; refresh may return a new refresh token.
//     Documented at https://developers.strava.com/docs/authentication/
//   - twitch: Twitch.
//     Authorize at https://id.twitch.tv/oauth2/authorize;
//     token at https://id.twitch.tv/oauth2/token;
//     revoke (RFC 7009) at https://id.twitch.tv/oauth2/revoke.
//     Default scopes "user:read:email", joined with " ".
//     Client authentication: client_id and client_secret in the form. PKCE: unsupported.
//     Quirks: The answer lists scope as a JSON array; token_type is lowercase bearer. Refresh returns a new refresh token.
//     Documented at https://dev.twitch.tv/docs/authentication/getting-tokens-oauth/
//   - x: X.
//     Authorize at https://x.com/i/oauth2/authorize;
//     token at https://api.x.com/2/oauth2/token;
//     revoke (RFC 7009) at https://api.x.com/2/oauth2/revoke.
//     Default scopes "tweet.read users.read offline.access", joined with " ".
//     Client authentication: HTTP Basic. PKCE: required.
//     Quirks: PKCE is required; confidential clients use HTTP Basic. Access tokens last two hours; offline.access yields a rotating refresh token.
//     Documented at https://docs.x.com/fundamentals/authentication/oauth-2-0/user-access-token
//   - xero: Xero.
//     Authorize at https://login.xero.com/identity/connect/authorize;
//     token at https://identity.xero.com/connect/token;
//     revoke (RFC 7009) at https://identity.xero.com/connect/revocation.
//     Default scopes "openid profile email offline_access", joined with " ".
//     Client authentication: HTTP Basic. PKCE: supported.
//     Quirks: Access tokens last 30 minutes; refresh tokens rotate and expire after 60 days unused.
//     Documented at https://developer.xero.com/documentation/guides/oauth2/auth-flow
//   - zoom: Zoom.
//     Authorize at https://zoom.us/oauth/authorize;
//     token at https://zoom.us/oauth/token;
//     revoke (RFC 7009) at https://zoom.us/oauth/revoke.
//     Default scopes "", joined with " ".
//     Client authentication: HTTP Basic. PKCE: supported.
//     Quirks: Scopes are set on the app. Access tokens last one hour; refresh tokens rotate.
//     Documented at https://developers.zoom.us/docs/integrations/oauth/
package providers
