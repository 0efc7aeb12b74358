package oauthtemporal

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.temporal.io/sdk/temporal"
)

func TestUnauthorizedReadsBack(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("tool: %w", Unauthorized("github", "repo", "read:user"))
	need, ok := AsUnauthorized(err)
	if !ok || need.Provider != "github" || !slices.Equal(need.Scopes, []string{"repo", "read:user"}) {
		t.Fatalf("AsUnauthorized = %+v, %v", need, ok)
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || app.Type() != UnauthorizedType || app.Category() != temporal.ApplicationErrorCategoryBenign {
		t.Fatalf("%v: want a non-retryable %s", err, UnauthorizedType)
	}
	for _, other := range []error{nil, errors.New("x"), temporal.NewApplicationError("x", "Other", SignInNeeded{Provider: "p"})} {
		if _, ok := AsUnauthorized(other); ok {
			t.Errorf("AsUnauthorized(%v) = true", other)
		}
	}
}

func TestRefusalMessage(t *testing.T) {
	t.Parallel()
	for r, want := range map[refusal]string{
		{Code: "access_denied"}:                                 "The sign-in was not completed (access_denied).",
		{Code: "access_denied", Description: " User said\nno "}: "The sign-in was not completed (access_denied): User saidno",
		{Code: "<b>odd</b>", Description: "x"}:                  "The sign-in was not completed: x",
	} {
		if got := refusalMessage(r); got != want {
			t.Errorf("refusalMessage(%+v) = %q, want %q", r, got, want)
		}
	}
}
