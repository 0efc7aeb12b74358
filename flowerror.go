package oauthflow

import (
	"errors"
	"strings"

	"github.com/oauthflow/oauthflow/internal/clip"
)

// publicMessage is the text of err that may be shown to a user: the message of
// a *FlowError in its chain, or a generic sentence. Internal error text never
// reaches a user.
func publicMessage(err error) string {
	var fe *FlowError
	if errors.As(err, &fe) && fe.Message != "" {
		return fe.Message
	}
	return "Something went wrong. Please try again."
}

// FlowError is a failure with a message fit for the user who signs in.
type FlowError struct {
	Message string
	Err     error
}

func (e *FlowError) Error() string {
	if e.Err == nil {
		return e.Message
	}
	msg := e.Message
	if n := len(msg); n > 0 && msg[n-1] == '.' {
		msg = msg[:n-1] // one sentence, the cause last
	}
	return msg + ": " + e.Err.Error()
}

func (e *FlowError) Unwrap() error { return e.Err }

// Bounds of the error text a provider or an authorization server chooses
// (RFC 6749 §5.2 error, error_description, error_uri) wherever the library
// keeps, logs or shows it, as the callback's own parameters are bounded
// (maxParamLen): real codes are a few words, real descriptions a sentence.
const (
	maxErrorCodeLen        = clip.ErrorCode
	maxErrorDescriptionLen = clip.ErrorDescription
	maxErrorURILen         = clip.ErrorURI
	maxLoggedErrorLen      = 1024 // an error described for a log line or a health record
)

// serverText is s, text a provider or a server chose, as the library keeps,
// logs or shows it: without the characters that would not show as
// themselves (unshowable: a terminal acts on a control, a bidi override
// reorders what a person reads), at most max bytes.
func serverText(s string, max int) string {
	if len(s) > 4*max { // what is cut anyway is not scanned
		s = s[:4*max]
	}
	return showable(s, max)
}

// boundedError is err's text on one line, bounded and filtered (serverText):
// an error may carry a provider's answer.
func boundedError(err error) string {
	return serverText(strings.ReplaceAll(err.Error(), "\n", "; "), maxLoggedErrorLen)
}

// redirectError is the error a provider's redirect reported (RFC 6749
// §4.1.2.1), its text bounded and filtered.
func redirectError(provider, code, description, uri string) *ProviderError {
	return &ProviderError{ProviderID: provider, Code: serverText(code, maxErrorCodeLen),
		Description: serverText(description, maxErrorDescriptionLen), URI: serverText(uri, maxErrorURILen)}
}
