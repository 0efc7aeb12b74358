// Package oauthtemporal lets Temporal workflows own oauthflow sign-ins: an
// agent workflow whose tool meets "unauthorized" sends its user through the
// provider's sign-in as a child workflow, and resumes when the user is
// connected.
//
// The [Integration] is an [oauthflow.SignInOwner]: the module's callback
// endpoints check a sign-in's answer as for any other, then hand it to the
// integration, which seals it into the module's store under a fresh handle
// and sends the [SignIn] workflow a Temporal update with that handle only.
// The update's activity redeems the handle once, exchanges the code and
// stores the tokens, so that the code, the PKCE verifier and the tokens never
// enter a workflow's history; the update's result is the callback page's
// answer, on whichever instance of the app the browser reached.
//
// Wiring, in one place ([Setup] does the same):
//
//	c, _ := client.Dial(client.Options{...})
//	integ := oauthtemporal.New(c, oauthtemporal.Options{SignInTTL: cfg.SignInTTL})
//	cfg.SignInOwners = map[string]oauthflow.SignInOwner{oauthtemporal.OwnerName: integ}
//	mod, _ := oauthflow.New(ctx, cfg)
//	integ.Bind(mod)
//	w := worker.New(c, "agent", worker.Options{})
//	integ.Register(w)
//
// A tool activity reads its token with [Integration.AccessToken] or
// [Integration.Client], which return an [Unauthorized] error when the user
// must sign in; the workflow runs the tool through [CallWithSignIn], which
// runs [SignIn] as a child workflow on that error and calls the tool once
// more when the user signed in. The app shows the sign-in's link from
// [Integration.Prompt]. [DeviceSignIn] signs a user in with a code instead
// (the device grant), for an agent without a browser.
package oauthtemporal
