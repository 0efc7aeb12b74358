package oauthflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// EventKind names what happened to a user's connection to a provider.
type EventKind string

// The events a host app hears through its EventHook.
const (
	EventTokensStored    EventKind = "tokens_stored"    // a sign-in or StoreTokens wrote tokens
	EventTokensRefreshed EventKind = "tokens_refreshed" // a refresh succeeded
	EventRefreshFailed   EventKind = "refresh_failed"   // a refresh failed; GrantDead says whether the connection is gone
	EventRefreshUnsaved  EventKind = "refresh_unsaved"  // a refresh succeeded but its tokens could not be written: this process keeps them and writes them on the next read
	EventTokensDeleted   EventKind = "tokens_deleted"   // DeleteTokens removed the record
	EventRevokeFailed    EventKind = "revoke_failed"    // DeleteTokens could not revoke at the provider (the record is deleted anyway)
	EventConnected       EventKind = "connected"        // a sign-in flow completed
	EventFlowFailed      EventKind = "flow_failed"      // a sign-in flow ended without tokens
	EventSignInRefused   EventKind = "sign_in_refused"  // a completion did not come from the user or browser that started the sign-in, or a reconnect link was opened by another user

	// A connection's health ([Connection].Health): the first of a run of transient
	// refresh failures, and the refresh that ends one. Attempts counts the
	// failures; each failure is also an EventRefreshFailed.
	EventConnectionFailing   EventKind = "connection_failing"
	EventConnectionRecovered EventKind = "connection_recovered"
)

// Event is one thing that happened; Err says why for the failures.
type Event struct {
	Kind       EventKind
	UserID     string
	ProviderID string
	RunID      string // the sign-in run, for flow events
	Err        error
	GrantDead  bool // a refresh heard the provider say the grant is gone: the user must sign in again
	Attempts   int  // failed refreshes in a row, for refresh and health events
	// Reason says, on EventRefreshFailed and EventConnectionFailing, what
	// became of the connection in words an app may pass on to its user (in
	// a reconnect email, say: see [Module.ReconnectLink]): gone when
	// GrantDead, failing otherwise. It never holds the provider's own text.
	Reason string
	Time   time.Time
}

// EventHook receives events synchronously; it should return quickly. A panic in
// the hook is recovered and logged.
type EventHook func(ctx context.Context, e Event)

// notifier sends events to the hook and the log; the zero value only logs nothing.
type notifier struct {
	hook EventHook
	log  *slog.Logger
	now  func() time.Time
}

func (n notifier) emit(ctx context.Context, e Event) {
	if e.Time.IsZero() && n.now != nil {
		e.Time = n.now()
	}
	if e.Reason == "" && (e.Kind == EventRefreshFailed || e.Kind == EventConnectionFailing) {
		e.Reason = failureReason("The provider", e.GrantDead, e.Attempts)
	}
	if level := moduleLevel(e); n.log != nil && n.log.Enabled(ctx, level) { // the line is only built for a logger that keeps it
		n.log.LogAttrs(ctx, level, "oauthflow: "+string(e.Kind), eventAttrs(e)...)
	}
	if n.hook == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil && n.log != nil {
			n.log.Error("oauthflow: event hook panicked", slog.String("event", string(e.Kind)),
				slog.String("panic", fmt.Sprint(r)))
		}
	}()
	n.hook(ctx, e)
}

// moduleLevel is the level of e's line in the Module's own log
// (Config.Logger): the routine successes, one or two on every sign-in and
// refresh, at Debug, so that slog's default level writes a line only for
// what an operator may act on (a failure, a refusal, a connection's health
// changing); eventLevel otherwise. LogEvents keeps every event at Info and
// above, for an audit trail.
func moduleLevel(e Event) slog.Level {
	switch e.Kind {
	case EventTokensStored, EventTokensRefreshed, EventTokensDeleted, EventConnected:
		if e.Err == nil {
			return slog.LevelDebug
		}
	}
	return eventLevel(e)
}

func eventLevel(e Event) slog.Level {
	if e.Err != nil {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// eventAttrs never carries a token, a code, a verifier or a secret: only IDs and
// the error, whose text comes from our own wrapping and the provider's error code.
func eventAttrs(e Event) []slog.Attr {
	attrs := []slog.Attr{slog.String("user", e.UserID), slog.String("provider", e.ProviderID)}
	if e.RunID != "" {
		attrs = append(attrs, slog.String("run", e.RunID))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", logSafeError(e.Err)))
	}
	if e.GrantDead {
		attrs = append(attrs, slog.Bool("grant_dead", true))
	}
	if e.Attempts > 0 {
		attrs = append(attrs, slog.Int("attempts", e.Attempts))
	}
	return attrs
}

// logSafeError describes err for a log line or a health record. A provider's
// answer is reduced to its status and RFC 6749 error code, bounded and
// filtered (serverText): a raw response body is never logged, nor a code a
// provider made long.
func logSafeError(err error) string {
	var pe *ProviderError
	switch {
	case errors.As(err, &pe) && pe.StatusCode == 0 && pe.Code != "":
		return fmt.Sprintf("provider %s redirected with error %s", pe.ProviderID, serverText(pe.Code, maxErrorCodeLen))
	case errors.As(err, &pe) && pe.StatusCode == 0:
		reason := "the request failed"
		if pe.Err != nil {
			reason = boundedError(pe.Err)
		}
		return fmt.Sprintf("could not reach provider %s: %s", pe.ProviderID, reason)
	case errors.As(err, &pe):
		return strings.TrimSpace(fmt.Sprintf("provider %s answered HTTP %d %s", pe.ProviderID, pe.StatusCode, serverText(pe.Code, maxErrorCodeLen)))
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return strings.TrimSpace(fmt.Sprintf("provider answered HTTP %d %s", status, serverText(re.ErrorCode, maxErrorCodeLen)))
	}
	return boundedError(err)
}

// LogEvents is a hook that writes each event to l as a structured record: the
// message "oauthflow: <kind>", the user, provider and run, and for a failure
// the error (never a token or a response body) at Warn, with grant_dead when
// a refresh heard the grant is gone; Info otherwise. The Module already logs events to Config.Logger, its routine
// successes (a sign-in completed, tokens stored, refreshed or deleted) at Debug; this is for a logger of their own
// that keeps every event (an audit trail, say).
func LogEvents(l *slog.Logger) EventHook {
	return func(ctx context.Context, e Event) {
		if l.Enabled(ctx, eventLevel(e)) {
			l.LogAttrs(ctx, eventLevel(e), "oauthflow: "+string(e.Kind), eventAttrs(e)...)
		}
	}
}

// AllEvents is a hook that hands each event to every one of hooks in turn
// (LogEvents and a metrics adapter, say). A nil hook is skipped.
func AllEvents(hooks ...EventHook) EventHook {
	return func(ctx context.Context, e Event) {
		for _, h := range hooks {
			if h != nil {
				h(ctx, e)
			}
		}
	}
}
