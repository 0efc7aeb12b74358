package oauthtemporal

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// The workflow IDs of the end-to-end run, which the replay of its histories
// runs under: the agent computes its sign-in's ID from its own.
const (
	e2eAgentID  = "agent-e2e"
	e2eSignInID = e2eAgentID + "/sign-in/" + provider
)

// TestAgentSignsInAndResumes is the whole pattern: an agent workflow's tool
// finds no token, the agent runs the sign-in as a child workflow, the user's
// browser lands on the callback of another instance of the app, which hands
// the answer to the worker's instance through Temporal, and the agent calls
// the API again with the stored token. The grant is DPoP-bound, so that the
// sign-in has a key to keep out of history too. Its histories are the replay
// test's (-update rewrites them).
func TestAgentSignsInAndResumes(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{idp: oauthflowtest.Options{DPoP: true}})
	a.startWorker(t, a.integ)
	id := e2eAgentID
	run, err := temporalClient.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: a.taskQueue}, "test.Agent", "alice")
	if err != nil {
		t.Fatal(err)
	}
	prompt := a.prompt(t, id)
	if prompt.Status != oauthflow.PromptPending || prompt.Provider != provider || prompt.State == "" {
		t.Fatalf("prompt = %+v", prompt)
	}
	page := a.signIn(t, prompt.AuthURL)
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.URL.String(), a.url+oauthflow.CallbackPath) {
		t.Fatalf("the browser ended at %s with %d: %s", page.URL.Path, page.StatusCode, page.Body)
	}
	var got apiAnswer
	if err := run.Get(t.Context(), &got); err != nil {
		t.Fatal(err)
	}
	if got.User != oauthflowtest.DefaultUser || got.Repos == 0 {
		t.Fatalf("the agent got %+v", got)
	}
	st := a.idp.Stats()
	if st.CodesExchanged != 1 || st.APICalls != 1 {
		t.Fatalf("the provider exchanged %d codes and answered %d API calls, want 1 and 1", st.CodesExchanged, st.APICalls)
	}
	tok, err := a.web.Tokens.GetTokens(t.Context(), "alice", provider)
	if err != nil || tok.TokenType != "DPoP" {
		t.Fatalf("stored tokens: %+v, %v", tok, err)
	}
	if done := a.waitPrompt(t, e2eSignInID, oauthflow.PromptSuccess); done.Account != oauthflowtest.DefaultUser {
		t.Fatalf("the sign-in's prompt after it: %+v", done)
	}

	secrets := append(a.seen.secrets(), tok.AccessToken, tok.RefreshToken)
	if len(a.seen.codes) != 1 || len(a.seen.verifiers) != 1 || len(a.seen.dpopKeys) != 1 || tok.RefreshToken == "" {
		t.Fatalf("the test did not see every secret: %d codes, %d verifiers, %d keys", len(a.seen.codes), len(a.seen.verifiers), len(a.seen.dpopKeys))
	}
	for _, wf := range []struct{ id, file string }{{id, "agent.json"}, {e2eSignInID, "signin.json"}} {
		h := history(t, wf.id)
		assertNoSecret(t, h, secrets)
		if hits, _ := payloadsContaining(h, []byte(prompt.State)); len(hits) == 0 && wf.file == "signin.json" {
			t.Fatalf("the scanner does not find the sign-in's state in %s's history", wf.id)
		}
		saveHistory(t, wf.file, h)
	}
}

// TestUserDoesNotSignIn: the user refuses at the provider; the refusal shows
// on the prompt, the sign-in waits until it lapses, and the agent hears that
// the user did not sign in, with the refusal's words.
func TestUserDoesNotSignIn(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{integ: Options{SignInTTL: 3 * time.Second}})
	a.startWorker(t, a.integ)
	id := uniqueID(t, "agent")
	run, err := temporalClient.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: a.taskQueue}, "test.Agent", "alice")
	if err != nil {
		t.Fatal(err)
	}
	prompt := a.prompt(t, id)
	a.idp.DenyNext()
	page := a.signIn(t, prompt.AuthURL)
	if !strings.Contains(page.Body, "access_denied") && !strings.Contains(page.Body, "denied") {
		t.Fatalf("the refusal's page: %d %s", page.StatusCode, page.Body)
	}
	refused := a.waitPrompt(t, id, oauthflow.PromptError)
	if !strings.Contains(refused.Message, "access_denied") {
		t.Fatalf("the prompt after the refusal: %+v", refused)
	}
	err = run.Get(t.Context(), nil)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != NotSignedInType || !strings.Contains(app.Error(), "access_denied") {
		t.Fatalf("the agent ended with %v, want a %s error naming the refusal", err, NotSignedInType)
	}
	var res SignInResult
	if err := temporalClient.GetWorkflow(t.Context(), id+"/sign-in/"+provider, "").Get(t.Context(), &res); err != nil || res.Authenticated {
		t.Fatalf("the sign-in ended %+v, %v", res, err)
	}
	if st := a.idp.Stats(); st.CodesExchanged != 0 {
		t.Fatalf("%d codes exchanged", st.CodesExchanged)
	}
}
