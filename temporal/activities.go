package oauthtemporal

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode"

	"github.com/oauthflow/oauthflow"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// stashedAnswer is what CompleteSignIn stashes for the exchange activity: the
// consumed sign-in (with its PKCE verifier and DPoP key) and the provider's
// answer (with the code).
type stashedAnswer struct {
	Session *oauthflow.Session       `json:"session"`
	Answer  oauthflow.CallbackAnswer `json:"answer"`
}

// buildSignIn is the build activity: build_oauth_url for in, owned by the
// integration, under the calling workflow's ID.
func (i *Integration) buildSignIn(ctx context.Context, in SignInInput) (builtSignIn, error) {
	mod, err := i.module()
	if err != nil {
		return builtSignIn{}, err
	}
	scopes := in.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	args, err := json.Marshal(oauthflow.BuildOAuthURLArgs{Provider: in.Provider, Scopes: scopes})
	if err != nil {
		return builtSignIn{}, err
	}
	tc := oauthflow.ToolContext{UserID: in.UserID, RunID: activity.GetInfo(ctx).WorkflowExecution.ID, Owner: OwnerName}
	raw, err := mod.BuildOAuthURL.Call(ctx, tc, args)
	if err != nil {
		return builtSignIn{}, buildError(err)
	}
	var res oauthflow.BuildOAuthURLResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return builtSignIn{}, err
	}
	return builtSignIn{AuthURL: res.AuthURL, State: res.State, Binding: res.Binding, TTL: i.opts.SignInTTL}, nil
}

// buildError is retried when the store or the provider may answer later, and
// fails the sign-in at once otherwise (an unknown provider, a bad user ID).
func buildError(err error) error {
	if errors.Is(err, oauthflow.ErrStoreUnavailable) || oauthflow.IsTransient(err) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "SignInNotBuilt", nil)
}

// exchangeSignIn is the exchange activity: it redeems handle (once: a
// retry finds it gone), checks that the answer is for a sign-in of the
// calling workflow, and exchanges the code. Only the outcome leaves it.
func (i *Integration) exchangeSignIn(ctx context.Context, handle string) (exchangeOutcome, error) {
	mod, err := i.module()
	if err != nil {
		return exchangeOutcome{}, err
	}
	var st stashedAnswer
	err = i.stash(mod, i.opts.CompletionTimeout).take(ctx, handle, &st)
	switch {
	case errors.Is(err, errStashGone):
		return exchangeOutcome{Gone: true, Message: msgGone}, nil
	case err != nil:
		return exchangeOutcome{}, err
	case st.Session == nil || st.Session.WorkflowID != activity.GetInfo(ctx).WorkflowExecution.ID:
		i.log.WarnContext(ctx, "oauthtemporal: an answer for another workflow's sign-in was refused")
		return exchangeOutcome{Gone: true, Message: msgGone}, nil
	}
	s := st.Session
	if err := mod.ExchangeSignIn(ctx, s, st.Answer); err != nil {
		return exchangeOutcome{Message: userMessage(err)}, nil
	}
	out := exchangeOutcome{Connected: true}
	if t, err := mod.Tokens.GetTokens(ctx, s.UserID, s.Provider); err == nil {
		out.Account = t.Account
	}
	return out, nil
}

// msgGone is the page's text for an answer that names nothing.
const msgGone = "This sign-in link has expired or was already used."

// userMessage says why an exchange failed, for the user's page: the
// module's own message when it has one, never the error's text.
func userMessage(err error) string {
	var fe *oauthflow.FlowError
	var pe *oauthflow.ProviderError
	switch {
	case errors.As(err, &fe) && fe.Message != "":
		return fe.Message
	case errors.Is(err, oauthflow.ErrSessionNotFound):
		return msgGone
	case errors.Is(err, oauthflow.ErrStoreUnavailable):
		return "The service is temporarily unavailable. Please try again later."
	case oauthflow.IsTransient(err):
		return "The provider could not be reached. Please try again later."
	case errors.As(err, &pe) && plainWord(pe.Code):
		return "The provider did not accept the sign-in (" + pe.Code + ")."
	}
	return msgNotComplete
}

// refusalMessage says on the prompt that the provider refused the sign-in:
// its error code when it is a plain word, and its description, clipped and
// stripped of control characters, since the browser brought both.
func refusalMessage(r refusal) string {
	msg := "The sign-in was not completed"
	if plainWord(r.Code) {
		msg += " (" + r.Code + ")"
	}
	d := []rune(strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return -1
		}
		return c
	}, strings.TrimSpace(r.Description)))
	if len(d) > maxDescriptionRunes {
		d = append(d[:maxDescriptionRunes], '…')
	}
	if len(d) > 0 {
		return msg + ": " + string(d)
	}
	return msg + "."
}

// maxDescriptionRunes bounds a provider's error description on the prompt.
const maxDescriptionRunes = 300

// plainWord reports whether s is an RFC 6749 error code as a person may
// read it: 1 to 64 of a-z, 0-9 and "_".
func plainWord(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
