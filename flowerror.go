package oauthflow

import (
	"errors"
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
